"""Cancelling a running run from its page."""

import pytest
from playwright.sync_api import expect

from runs import services
from runs.actor import Actor
from tests.browser.conftest import log_in, screenshot
from tests.conftest import wait_for, wait_run

pytestmark = pytest.mark.browser

SLOW = """
name: slow-loop
providers:
  slow:
    kind: command
    command: "sleep 30; echo hi"
nodes:
  - id: wait
    provider: slow
    loop:
      prompt: Take your time.
      until: DONE
      max_iterations: 3
"""


def test_cancel_a_running_run(live_worker, make_recipe, operator, console_server, page):
    recipe = make_recipe(SLOW, slug="slow-loop")
    run = services.start_run(recipe, actor=Actor.operator(operator, "console"), message="slow one")
    wait_for(lambda: run.iterations.filter(status="running").exists(), 30, message="iteration")
    log_in(page, console_server, "otto")
    page.goto(console_server + run.get_absolute_url())
    expect(page.locator("#run-header .badge").first).to_have_text("running")
    expect(page.locator("#run-nodes")).to_contain_text("iteration 1 of 3")
    screenshot(page, "run-running")
    # The duration keeps counting while the run runs, without a reload.
    clock = page.locator("[data-running-since]")
    first = clock.inner_text()
    page.wait_for_function(
        "text => document.querySelector('[data-running-since]').textContent !== text", arg=first
    )
    # The event log is open and follows the run live, in sentences.
    page.locator("details.events > summary").click()
    expect(page.locator("#event-log")).to_contain_text("wait iteration 1 started.")
    # Cancelling asks first.
    page.locator("summary:has-text('Cancel run')").click()
    expect(page.locator(".confirm-box")).to_contain_text("Stop run")
    run.refresh_from_db()
    assert run.status == "running"
    page.locator("button:has-text('Yes, cancel the run')").click()
    expect(page.locator("#run-header .badge").first).to_have_text("cancelled")
    expect(page.locator("#event-log")).to_contain_text("The run was cancelled: cancelled by otto")
    assert page.locator("details.events").get_attribute("open") is not None
    expect(page.locator("#run-notice")).to_contain_text(f"Run {run.pk} cancelled.")
    expect(page.locator("button:has-text('Resume')")).to_be_visible()
    wait_run(run, "cancelled")
    wait_for(
        lambda: not run.iterations.filter(status="running").exists(), 10, message="agent stopped"
    )
