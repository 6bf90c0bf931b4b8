"""Browser Back after a decision: the inbox it goes back to shows things as they are now,
whether the browser asks the server again or restores the page from its back/forward
cache (which Playwright turns off unless asked; console-page.js reloads such a page)."""

import re

import pytest
from playwright.sync_api import expect

from runs import services
from runs.actor import Actor
from tests import find_chromium
from tests.browser.conftest import log_in, screenshot
from tests.conftest import wait_run

pytestmark = pytest.mark.browser


@pytest.fixture(params=["http-cache", "bfcache"])
def browser(request, chromium):
    if request.param == "http-cache":
        yield chromium
        return
    with_bfcache = chromium.browser_type.launch(
        executable_path=find_chromium.executable(),
        headless=True,
        args=find_chromium.ARGS,
        ignore_default_args=["--disable-back-forward-cache"],
    )
    yield with_bfcache
    with_bfcache.close()


def test_back_to_the_inbox_after_a_decision_shows_the_inbox_as_it_is_now(
    browser, live_worker, bundled, operator, console_server
):
    run = services.start_run(
        bundled["guided-refine"], actor=Actor.operator(operator, "console"), message="go back"
    )
    wait_run(run, "paused")
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(60_000)
    page = context.new_page()
    try:
        log_in(page, console_server, "otto")
        waiting = page.locator("#inbox section").first
        expect(waiting.locator("tr[data-gate-item]")).to_have_count(1)
        page.locator("#inbox tr[data-gate-item] a:has-text('Review')").click()
        page.wait_for_url(re.compile(rf"/runs/{run.pk}/"))
        page.locator("[data-gate-primary]").click()
        expect(page.locator("#gate-panel")).to_contain_text("by otto")
        wait_run(run, "completed")

        page.go_back()
        page.wait_for_url(console_server + "/")
        waiting = page.locator("#inbox section").first
        expect(waiting).to_contain_text("Nothing is waiting for you.")
        expect(waiting.locator("tr[data-gate-item]")).to_have_count(0)
        expect(page.locator("#inbox")).to_contain_text("Recently finished")
        screenshot(page, "inbox-after-back")
    finally:
        context.close()
