"""Deciding at gates in a real browser: accept a completed iteration, or give feedback."""

import re

import pytest
from playwright.sync_api import expect

from runs import services
from runs.actor import Actor
from runs.models import Iteration, Run
from tests.browser.conftest import log_in, mark_page, screenshot, still_same_page
from tests.conftest import wait_run

pytestmark = pytest.mark.browser


def test_start_from_the_form_then_accept_and_complete(
    live_worker, bundled, operator, console_server, page
):
    log_in(page, console_server, "otto")
    screenshot(page, "inbox-empty")
    page.goto(console_server + "/recipes/guided-refine/start/")
    page.fill("textarea[name=message]", "a haiku about loops")
    page.select_option("select[name=input_tone]", "formal")
    page.click("button:has-text('Start run')")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    mark_page(page)
    run = Run.objects.get(message="a haiku about loops")
    assert run.inputs["tone"] == "formal"

    # The first iteration and its gate arrive without a reload.
    timeline = page.locator("#timeline")
    expect(timeline.locator(".iteration")).to_have_count(1)
    expect(timeline).to_contain_text("refine · iteration 1")
    primary = page.locator("[data-gate-primary]")
    expect(primary).to_have_text("Accept & complete")
    expect(page.locator("#gate-panel")).to_contain_text("The agent said DONE.")
    screenshot(page, "gate")

    primary.click()
    expect(page.locator("#gate-panel")).to_contain_text("by otto")
    expect(page.locator("#run-header .badge").first).to_have_text("completed")
    assert still_same_page(page)
    wait_run(run, "completed")
    gate = run.gates.get()
    assert gate.status == "accepted" and gate.comment == "" and gate.surface == "console"
    screenshot(page, "run-completed")

    page.goto(console_server + "/")
    expect(page.locator("#inbox")).to_contain_text(f"Run {run.pk}")


def test_feedback_turns_the_button_to_continue_and_reaches_the_next_prompt(
    live_worker, bundled, operator, console_server, page
):
    run = services.start_run(
        bundled["guided-refine"], actor=Actor.operator(operator, "console"), message="a limerick"
    )
    log_in(page, console_server, "otto")
    page.goto(console_server + run.get_absolute_url())
    mark_page(page)
    primary = page.locator("[data-gate-primary]")
    expect(primary).to_have_text("Accept & complete")

    feedback = page.locator("[data-gate-feedback]")
    feedback.fill("Mention the weather, please")
    expect(primary).to_have_text("Continue")
    feedback.fill("   ")
    expect(primary).to_have_text("Accept & complete")
    feedback.fill("Mention the weather, please")
    expect(primary).to_have_text("Continue")
    primary.click()

    # The next iteration appears live; its prompt (as sent) carries the feedback.
    newest = page.locator("#timeline .iteration").first
    expect(newest).to_contain_text("refine · iteration 2")
    expect(newest.locator(".feedback")).to_contain_text("Mention the weather, please")
    newest.locator("details.prompt summary").click()
    expect(newest.locator("details.prompt pre")).to_contain_text(
        "Reviewer feedback to address: Mention the weather, please"
    )
    expect(page.locator("#gate-panel")).to_contain_text("iteration 2")
    expect(page.locator("#run-header .badge").first).to_have_text("paused")
    assert still_same_page(page)
    second = Iteration.objects.get(run=run, number=2)
    assert "Mention the weather, please" in second.prompt
    screenshot(page, "run-page")
    # The event log, opened, grows live with what the worker did, in sentences.
    page.locator("details.events summary").click()
    log = page.locator("#event-log")
    expect(log).to_contain_text("otto asked for another iteration at refine")
    expect(log).to_contain_text("refine iteration 2 finished")
    assert "{" not in log.inner_text()

    # The inbox lists the gate that is waiting, and drops it live once decided.
    page.goto(console_server + "/")
    waiting = page.locator("#inbox section").first
    expect(waiting).to_contain_text(f"Run {run.pk}")
    screenshot(page, "inbox")
    services.approve(run.gates.get(status="pending").pk, Actor.operator(operator, "cli"))
    expect(waiting).to_contain_text("Nothing is waiting for you.")


def test_a_second_decision_shows_already_decided(
    live_worker, bundled, operator, editor, console_server, page, chromium
):
    run = services.start_run(
        bundled["guided-refine"], actor=Actor.operator(operator, "console"), message="two browsers"
    )
    wait_run(run, "paused")
    log_in(page, console_server, "otto")
    page.goto(console_server + run.get_absolute_url())
    other = chromium.new_context().new_page()
    # The second browser gets no live updates, so it still shows the form when it decides.
    other.route("**/live/**", lambda route: route.abort())
    log_in(other, console_server, "edie")
    other.goto(console_server + run.get_absolute_url())
    expect(other.locator("[data-gate-primary]")).to_be_visible()

    page.locator("[data-gate-primary]").click()
    expect(page.locator("#gate-panel")).to_contain_text("by otto")
    other.locator("[data-gate-feedback]").fill("one more pass")
    other.locator("[data-gate-primary]").click()
    expect(other.locator("#gate-panel .notice")).to_contain_text("already decided by otto")
    expect(other.locator("#gate-panel")).to_contain_text("by otto")
    other.context.close()
    assert run.gates.get().decided_by == operator


def test_a_live_refresh_keeps_what_the_reviewer_typed(
    live_worker, bundled, operator, console_server, page
):
    """The live stream asks for the gate panel again after every run event; while the same
    gate waits, the typed feedback, an open "Reject…" and its reason stay as they are."""
    run = services.start_run(
        bundled["guided-refine"], actor=Actor.operator(operator, "console"), message="a sonnet"
    )
    log_in(page, console_server, "otto")
    page.goto(console_server + run.get_absolute_url())
    mark_page(page)
    primary = page.locator("[data-gate-primary]")
    expect(primary).to_have_text("Accept & complete")
    page.locator("[data-gate-feedback]").fill("Half as long, please")
    page.locator("details.reject summary").click()
    page.locator("textarea[name=reason]").fill("off topic")

    refreshes = page.evaluate(
        """() => new Promise((done) => {
            const refresher = document.querySelector('[hx-target="#gate-panel"]');
            let answered = 0;
            refresher.addEventListener('htmx:afterRequest', () => { if (++answered === 2) done(answered); });
            htmx.trigger(refresher, 'sse:gate-changed');
            setTimeout(() => htmx.trigger(refresher, 'sse:gate-changed'), 50);
        })"""
    )
    assert refreshes == 2
    expect(page.locator("[data-gate-feedback]")).to_have_value("Half as long, please")
    expect(primary).to_have_text("Continue")
    expect(page.locator("details.reject")).to_have_attribute("open", "")
    expect(page.locator("textarea[name=reason]")).to_have_value("off topic")
    assert still_same_page(page)

    # A new gate does replace the panel: Continue, then iteration 2's gate arrives empty.
    primary.click()
    expect(page.locator("#gate-panel")).to_contain_text("iteration 2")
    expect(page.locator("[data-gate-feedback]")).to_have_value("")
    wait_run(run, "paused")


def test_feedback_over_the_limit_is_counted_and_refused_never_cut(
    live_worker, bundled, operator, console_server, page
):
    """A paste longer than the limit is neither cut nor sent silently: the counter says it
    is too long, the gate refuses it with its message and gives the whole text back."""
    run = services.start_run(
        bundled["guided-refine"], actor=Actor.operator(operator, "console"), message="long"
    )
    wait_run(run, "paused")
    log_in(page, console_server, "otto")
    page.goto(console_server + run.get_absolute_url())
    feedback = page.locator("[data-gate-feedback]")
    counter = page.locator("#gate-panel .gate-form [data-limit-counter]")
    expect(counter).to_have_text("Up to 100,000 characters.")
    feedback.fill("Shorter, please.")
    expect(counter).to_have_text("16 of 100,000 characters.")

    feedback.fill("x" * 100_001)
    length = "document.querySelector('[data-gate-feedback]').value.length"
    assert page.evaluate(length) == 100_001
    expect(counter).to_have_text(
        "100,001 of 100,000 characters: 1 too many. Shorten it; as it is, the gate refuses it."
    )
    expect(counter).to_have_class(re.compile("over-limit"))
    screenshot(page, "feedback-over-the-limit")
    page.locator("[data-gate-primary]").click()
    expect(page.locator("#gate-panel .notice")).to_contain_text(
        "Feedback is limited to 100,000 characters; this has 100,001."
    )
    expect(page.locator("#gate-panel .notice")).to_contain_text("The gate is still waiting.")
    assert page.evaluate(length) == 100_001  # given back whole
    expect(counter).to_contain_text("1 too many")
    expect(counter).to_have_class(re.compile("over-limit"))  # still marked, after the swap
    gate = run.gates.get()
    assert gate.status == "pending"

    feedback.fill("x" * 100_000)
    expect(counter).to_have_text("100,000 of 100,000 characters.")
    page.locator("[data-gate-primary]").click()
    expect(page.locator("#gate-panel")).to_contain_text("iteration 2")
    gate.refresh_from_db()
    assert gate.status == "iterated" and len(gate.comment) == 100_000
