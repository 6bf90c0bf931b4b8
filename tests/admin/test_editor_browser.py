"""The source editor in a real browser: line numbers, error lines marked, no CSP breakage."""

import pytest
from playwright.sync_api import sync_playwright

from recipes.models import Recipe

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

GOOD = "name: hello\nnodes:\n  - id: greet\n    bash: echo hello\n"
BROKEN = GOOD + "  - id: again\n    depends_on: [nowhere]\n    bash: echo again\n"


@pytest.fixture
def page(live_server, monkeypatch):
    # Playwright's sync API runs an event loop in this thread; the ORM calls made by the
    # test around it are still plain synchronous ones.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_page()
        page.csp_errors = []
        page.on(
            "console",
            lambda msg: "Content Security Policy" in msg.text and page.csp_errors.append(msg.text),
        )
        page.on("pageerror", lambda exc: page.csp_errors.append(str(exc)))
        yield page
        browser.close()


def test_editor_numbers_lines_and_marks_errors(page, live_server, admin_user, make_recipe):
    recipe = make_recipe(GOOD, slug="hello")
    # Straight to the admin: the inbox would hold a live (never-ending) event stream open.
    page.goto(f"{live_server.url}/accounts/login/?next=/admin/")
    page.fill("#id_username", "ada")
    page.fill("#id_password", "pw-ada")
    page.press("#id_password", "Enter")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    page.goto(f"{live_server.url}/admin/recipes/recipe/{recipe.pk}/change/")

    gutter = page.locator(".recipe-editor-gutter div")
    assert gutter.count() == GOOD.count("\n") + 1
    page.fill("textarea.recipe-source", BROKEN)
    assert gutter.count() == BROKEN.count("\n") + 1

    page.click("input[name=_continue]")
    assert "line 6" in page.locator(".errorlist").first.inner_text()
    marked = page.locator(".recipe-editor-gutter .has-error")
    assert marked.count() == 1 and marked.inner_text() == "6"
    assert page.csp_errors == []
    assert Recipe.objects.get(pk=recipe.pk).source == GOOD
