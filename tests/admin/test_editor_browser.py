"""The source editor in a real browser: line numbers, error lines marked, no CSP breakage."""

import pytest
from playwright.sync_api import expect, sync_playwright

from recipes.models import Recipe
from tests import find_chromium

pytestmark = pytest.mark.browser

GOOD = "name: hello\nnodes:\n  - id: greet\n    bash: echo hello\n"
BROKEN = GOOD + "  - id: again\n    depends_on: [nowhere]\n    bash: echo again\n"


@pytest.fixture
def page(live_server, monkeypatch):
    # Playwright's sync API runs an event loop in this thread; the ORM calls made by the
    # test around it are still plain synchronous ones.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    try:
        executable = find_chromium.executable()
    except find_chromium.NoChromium as exc:
        pytest.fail(str(exc), pytrace=False)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=executable, headless=True, args=find_chromium.ARGS
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


def log_in_to_admin(page, live_server):
    # Straight to the admin: the inbox would hold a live (never-ending) event stream open.
    page.goto(f"{live_server.url}/accounts/login/?next=/admin/")
    page.fill("#id_username", "ada")
    page.fill("#id_password", "pw-ada")
    page.press("#id_password", "Enter")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


def test_editor_numbers_lines_and_marks_errors(page, live_server, admin_user, make_recipe):
    recipe = make_recipe(GOOD, slug="hello")
    log_in_to_admin(page, live_server)
    page.goto(f"{live_server.url}/admin/recipes/recipe/{recipe.pk}/change/")

    gutter = page.locator(".recipe-editor-gutter div")
    # The gutter is drawn by the page's script: wait for it (a busy machine runs it late).
    expect(gutter).to_have_count(GOOD.count("\n") + 1)
    page.fill("textarea.recipe-source", BROKEN)
    expect(gutter).to_have_count(BROKEN.count("\n") + 1)

    page.click("input[name=_continue]")
    assert "line 6" in page.locator(".errorlist").first.inner_text()
    marked = page.locator(".recipe-editor-gutter .has-error")
    expect(marked).to_have_count(1)
    expect(marked).to_have_text("6")
    assert page.csp_errors == []
    assert Recipe.objects.get(pk=recipe.pk).source == GOOD


# 20 nodes of two lines after a 2-line head; line 34 is node n15's script, made empty.
LONG = "name: long\nnodes:\n" + "".join(f"  - id: n{i}\n    bash: echo {i}\n" for i in range(20))
ERROR_LINE = 34
LONG_BROKEN = "\n".join(
    '    bash: ""' if number == ERROR_LINE else line
    for number, line in enumerate(LONG.split("\n"), start=1)
)

# Where line `n` of the textarea is drawn, from the textarea's own metrics.
LINE_TOP = """(textarea, n) => {
  const box = textarea.getBoundingClientRect();
  const style = getComputedStyle(textarea);
  return box.top + parseFloat(style.borderTopWidth) + parseFloat(style.paddingTop)
    + (n - 1) * parseFloat(style.lineHeight) - textarea.scrollTop;
}"""


def test_error_marker_sits_level_with_its_line_however_the_text_scrolls(
    page, live_server, admin_user, make_recipe
):
    assert LONG_BROKEN.split("\n")[ERROR_LINE - 2].strip() == "- id: n15"
    recipe = make_recipe(LONG, slug="long")
    log_in_to_admin(page, live_server)
    page.goto(f"{live_server.url}/admin/recipes/recipe/{recipe.pk}/change/")
    page.fill("textarea.recipe-source", LONG_BROKEN)
    page.click("input[name=_continue]")
    assert f"line {ERROR_LINE}" in page.locator(".errorlist").first.inner_text()

    textarea = page.locator("textarea.recipe-source")
    marker = page.locator(".recipe-editor-gutter .has-error")
    editor = page.locator(".recipe-editor").bounding_box()
    assert marker.inner_text() == str(ERROR_LINE)

    def check_level():
        line_top = textarea.evaluate(LINE_TOP, ERROR_LINE)
        box = marker.bounding_box()
        assert abs(box["y"] - line_top) <= 1.5, (box["y"], line_top)
        return box

    # The editor opens scrolled to the error: the marker is level with it and in view.
    box = check_level()
    assert editor["y"] <= box["y"] and box["y"] + box["height"] <= editor["y"] + editor["height"]
    # Scrolled to the very end (past the horizontal scrollbar's height) and back to the top.
    textarea.evaluate("t => { t.scrollTop = t.scrollHeight; }")
    page.wait_for_function("() => document.querySelector('.recipe-editor-gutter').scrollTop > 0")
    page.wait_for_function(
        "() => { const t = document.querySelector('textarea.recipe-source');"
        " return document.querySelector('.recipe-editor-gutter').scrollTop === t.scrollTop; }"
    )
    check_level()
    textarea.evaluate("t => { t.scrollTop = 0; }")
    page.wait_for_function("() => document.querySelector('.recipe-editor-gutter').scrollTop === 0")
    check_level()
    # The gutter never grows past the text box.
    gutter = page.locator(".recipe-editor-gutter").bounding_box()
    assert gutter["height"] <= editor["height"]
    assert page.csp_errors == []


def test_warnings_are_marked_beside_the_errors(page, live_server, admin_user, make_recipe):
    loop = (
        "name: typo\nprovider: demo\nnodes:\n  - id: polish\n    loop:\n"
        "      prompt: Improve it.\n      untill: DONE\n      max_iterations: 3\n"
    )
    recipe = make_recipe(GOOD, slug="typo")
    log_in_to_admin(page, live_server)
    page.goto(f"{live_server.url}/admin/recipes/recipe/{recipe.pk}/change/")
    page.fill("textarea.recipe-source", loop)
    page.click("input[name=_continue]")
    problems = page.locator(".errorlist").first.inner_text()
    assert "completion condition" in problems and "'untill'" in problems
    assert page.locator(".recipe-editor-gutter .has-warning").inner_text() == "7"
    assert page.locator(".recipe-editor-gutter .has-error").inner_text() == "5"
