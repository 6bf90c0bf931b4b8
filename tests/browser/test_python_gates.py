"""A gate in a Python loop, decided in Chromium: for a run started from the console (a
worker suspends at the gate) and for one started from a script (the script waits)."""

import asyncio
import re
import threading

import pytest
from playwright.sync_api import expect

from recipes.editing import create_recipe
from recipes.models import Recipe
from runs.models import Iteration, Run
from tests.browser.conftest import log_in, mark_page, screenshot, still_same_page
from tests.conftest import wait_for, wait_run
from tests.python.test_gates import gated_source, import_file

pytestmark = pytest.mark.browser


def decide_feedback_then_accept(page, run: Run) -> None:
    """In the open run page: feedback at iteration 1, then accept at iteration 2."""
    panel = page.locator("#gate-panel")
    expect(panel).to_contain_text("reviewer")
    expect(panel).to_contain_text("iteration 1")
    primary = page.locator("[data-gate-primary]")
    expect(primary).to_have_text("Accept & complete")
    screenshot(page, "python-loop-gate")
    page.locator("[data-gate-feedback]").fill("MORE-PUNCH")
    expect(primary).to_have_text("Continue")
    primary.click()

    expect(panel).to_contain_text("iteration 2")
    expect(page.locator("#run-header .badge").first).to_have_text("paused")
    assert "MORE-PUNCH" in Iteration.objects.get(run=run, node_id="writer", number=2).prompt
    # The iteration the feedback started says so on its card, as a YAML loop's does.
    second = page.locator("#timeline .iteration", has_text="writer · iteration 2")
    expect(second.locator(".feedback")).to_contain_text("MORE-PUNCH")
    expect(
        page.locator("#timeline .iteration", has_text="writer · iteration 1")
    ).not_to_contain_text("Feedback that started it")
    # The event log says what the loop checked in words, and that the run went on.
    page.locator("details.events summary").click()
    log = page.locator("#event-log")
    expect(log).to_contain_text("After iteration 1 of workflow, the stop condition was not met.")
    expect(log).to_contain_text("The run goes on.")
    expect(log).not_to_contain_text("Python iteration checked")
    expect(primary).to_have_text("Accept & complete")
    primary.click()
    expect(page.locator("#run-header .badge").first).to_have_text("completed")
    assert still_same_page(page)
    screenshot(page, "python-loop-completed")


def test_console_started_python_loop_gate(live_worker, operator, console_server, page, tmp_path):
    path = tmp_path / "browser_gated.py"
    path.write_text(gated_source())
    create_recipe(
        path.read_text(), slug="browser-gated", origin=Recipe.Origin.PROJECT, source_path=str(path)
    )
    log_in(page, console_server, "otto")
    page.goto(console_server + "/recipes/browser-gated/start/")
    page.fill("textarea[name=message]", "Write copy")
    page.click("button:has-text('Start run')")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    mark_page(page)
    run = Run.objects.get(message="Write copy")
    decide_feedback_then_accept(page, run)
    wait_run(run, "completed")
    assert run.events.get(kind="run_completed").data["ended"] == "accepted"


def test_script_started_python_loop_gate(live_worker, operator, console_server, page, tmp_path):
    path = tmp_path / "browser_script_gate.py"
    path.write_text(gated_source())
    module = import_file(path, "browser_script_gate")
    outcome = {}
    thread = threading.Thread(
        target=lambda: outcome.update(result=asyncio.run(module.workflow.run("From a script")))
    )
    thread.start()
    try:
        run = wait_for(lambda: Run.objects.filter(message="From a script").first(), 60)
        wait_for(lambda: run.gates.filter(status="pending").exists(), 60, message="a gate")
        log_in(page, console_server, "otto")
        page.goto(console_server + run.get_absolute_url())
        mark_page(page)
        decide_feedback_then_accept(page, run)
    finally:
        thread.join(120)
    assert outcome["result"].status == "accepted" and outcome["result"].iterations == 2
    run.refresh_from_db()
    assert run.status == "completed" and run.recipe.slug == "browser-script-gate"
