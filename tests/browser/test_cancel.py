"""Cancelling a running run from its page."""

import pytest
from playwright.sync_api import expect

from runs import services
from runs.actor import Actor
from runs.models import Run
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
    clock = page.locator("#run-header [data-running-since]")
    first = clock.inner_text()
    page.wait_for_function(
        "text => document.querySelector('#run-header [data-running-since]').textContent !== text",
        arg=first,
    )
    # The event log is open and follows the run live, in sentences.
    page.locator("details.events > summary").click()
    expect(page.locator("#event-log")).to_contain_text("wait iteration 1 started.")
    # Cancelling asks first.
    page.locator("summary:has-text('Cancel run')").click()
    expect(page.locator("details[data-confirm=cancel] .confirm-box")).to_contain_text("Stop run")
    # A live redraw of the header (as each event of a running run brings) keeps the open
    # confirmation open: it once closed under the person's pointer every second.
    page.evaluate("document.querySelector('#run-header').dataset.before = 'yes'")
    page.evaluate(
        "htmx.trigger(document.querySelector('[hx-target=\"#run-header\"][hidden]'), "
        "'sse:run-changed')"
    )
    page.wait_for_function("() => !document.querySelector('#run-header').dataset.before")
    expect(page.locator("details[data-confirm=cancel]")).to_have_attribute("open", "")
    expect(page.locator("button:has-text('Yes, cancel the run')")).to_be_visible()
    run.refresh_from_db()
    assert run.status == "running"
    page.locator("button:has-text('Yes, cancel the run')").click()
    expect(page.locator("#run-header .badge").first).to_have_text("cancelled")
    expect(page.locator("#event-log")).to_contain_text("The run was cancelled: cancelled by otto")
    assert page.locator("details.events").get_attribute("open") is not None
    expect(page.locator("#run-notice")).to_contain_text(f"Run {run.pk} cancelled.")
    expect(page.locator("summary:has-text('Resume')")).to_be_visible()
    # The node and the iteration it stopped say they were cancelled, not that they failed.
    expect(page.locator("#run-nodes .node").first).to_contain_text("Cancelled.")
    expect(page.locator("#timeline .iteration").first).to_contain_text("Cancelled.")
    expect(page.locator("#run-nodes")).not_to_contain_text("Failed")
    expect(page.locator("#timeline")).not_to_contain_text("Failed")
    wait_run(run, "cancelled")
    wait_for(
        lambda: not run.iterations.filter(status="running").exists(), 10, message="agent stopped"
    )


STEPPING = """
name: stepping-loop
providers:
  stepping:
    kind: command
    command: 'if [ "$LOOP_ITERATION" -ge 3 ]; then sleep 60; fi; echo "step $LOOP_ITERATION"'
nodes:
  - id: work
    provider: stepping
    loop:
      prompt: One more step.
      until: DONE
      max_iterations: 5
"""


def test_resume_says_what_runs_again_and_continue_keeps_what_finished(
    live_worker, make_recipe, operator, console_server, page
):
    """A loop cancelled in its third iteration: Resume warns that the two finished
    iterations run (and are paid for) again; "Continue from work #2" forks instead, carrying
    them over, and goes on with iteration 3."""
    recipe = make_recipe(STEPPING, slug="stepping-loop")
    run = services.start_run(recipe, actor=Actor.operator(operator, "console"), message="steps")
    wait_for(lambda: run.iterations.filter(number=3, status="running").exists(), 60, message="it 3")
    log_in(page, console_server, "otto")
    page.goto(console_server + run.get_absolute_url())
    page.locator("summary:has-text('Cancel run')").click()
    page.locator("button:has-text('Yes, cancel the run')").click()
    expect(page.locator("#run-header .badge").first).to_have_text("cancelled")

    resume = page.locator("summary:has-text('Resume (starts over)…')")
    expect(resume).to_have_attribute(
        "title", "Finished iterations run again: work starts over at iteration 1"
    )
    resume.click()
    box = page.locator(".resume-box")
    expect(box).to_contain_text(
        "work starts over at iteration 1: its 2 finished iterations run again "
        "(and are paid for again)."
    )
    expect(box).to_contain_text("continue from work #2 instead")
    expect(box.locator("button")).to_have_text("Yes, start over")
    screenshot(page, "resume-warning")
    run.refresh_from_db()
    assert run.status == "cancelled"  # opening the confirmation changed nothing

    page.locator("a:has-text('Continue from work #2…')").click()
    page.wait_for_url(f"**/runs/{run.pk}/fork/**")
    page.locator("button:has-text('Fork and continue')").click()
    page.wait_for_url(lambda url: f"/runs/{run.pk}/" not in url and "/fork/" not in url)
    fork = Run.objects.get(forked_from=run)
    carried = fork.iterations.filter(carried_from__isnull=False).order_by("number")
    assert [it.number for it in carried] == [1, 2]
    wait_for(lambda: fork.iterations.filter(number=3).exists(), 60, message="fork's iteration 3")
    assert not fork.iterations.filter(number__lt=3, carried_from__isnull=True).exists()
    run.refresh_from_db()
    assert run.status == "cancelled"
