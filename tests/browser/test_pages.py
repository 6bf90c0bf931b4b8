"""Pages render in Chromium without script errors, on a laptop and on a phone."""

import pytest
from playwright.sync_api import expect

from runs import services
from runs.actor import Actor
from tests.browser.conftest import log_in, screenshot
from tests.conftest import wait_run

pytestmark = pytest.mark.browser


def test_loop_group_run_recipe_page_and_phone_layout(
    live_worker, bundled, viewer, operator, console_server, page, chromium
):
    run = services.start_run(
        bundled["writer-reviewer"],
        actor=Actor.operator(operator, "console"),
        message="a new kettle",
    )
    wait_run(run, "completed", "failed")
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
    page.on("response", lambda r: r.status >= 400 and errors.append(f"{r.status} {r.url}"))
    log_in(page, console_server, "vera")
    page.goto(console_server + run.get_absolute_url())
    nodes = page.locator("#run-nodes")
    expect(nodes).to_contain_text("draft-loop")
    expect(nodes.locator(".group-iterations > li").first).to_contain_text("review")
    expect(page.locator("button:has-text('Cancel run')")).to_have_count(0)
    screenshot(page, "run-loop-group")

    page.goto(console_server + "/recipes/writer-reviewer/")
    expect(page.locator(".graph").first).to_contain_text("Body, repeated each iteration")
    screenshot(page, "recipe")
    page.goto(console_server + "/runs/")
    expect(page.locator("table.runs")).to_contain_text(f"Run {run.pk}")
    assert not errors, errors

    phone = chromium.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    small = phone.new_page()
    log_in(small, console_server, "vera")
    small.goto(console_server + run.get_absolute_url())
    expect(small.locator("#run-header")).to_be_visible()
    width = small.evaluate("document.documentElement.scrollWidth")
    assert width <= 400, f"the run page scrolls sideways on a phone ({width}px)"
    screenshot(small, "run-phone")
    phone.close()
