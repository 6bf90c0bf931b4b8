"""What a person sees of gate deadlines and the gate keys, in Chromium: the inbox orders
gates by how long they have waited and shows each deadline; when the sweep reminds, the
inbox and the run page say so live and the webhook receives the reminder; j / k / a / f / ?
work in the inbox and on a run page, and never while typing."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from notifications.models import Subscription
from runs import services
from runs.actor import Actor
from runs.executor.sweep import sweep
from runs.models import Gate
from tests.browser.conftest import log_in, mark_page, screenshot, still_same_page
from tests.conftest import wait_for, wait_run
from tests.notifications.receiver import Receiver

pytestmark = pytest.mark.browser

WITH_DEADLINE = """
name: release
nodes:
  - id: ship
    approval:
      message: Ship the release?
      gate_timeout: 1h
      on_timeout: remind
"""

PLAIN = """
name: release
nodes:
  - id: ship
    approval:
      message: Ship the release?
"""


def waiting_gates(make_recipe, operator, source, count=2):
    recipe = make_recipe(source, "release")
    runs = [
        services.start_run(recipe, actor=Actor.operator(operator, "console"), message=f"v{i}")
        for i in range(count)
    ]
    for run in runs:
        wait_run(run, "paused")
    return runs, [services.pending_gate(run) for run in runs]


def test_a_deadline_reminder_as_a_person_sees_it(
    live_worker, make_recipe, operator, console_server, page, settings
):
    settings.LOOP_WEBHOOK_HOSTS = ["127.0.0.1"]
    with Receiver() as receiver:
        hook = Subscription.objects.create(name="team", url=receiver.url, on_gate_waiting=False)
        receiver.secret = hook.secret
        (newer_wait, longest_wait), (fresh, late) = waiting_gates(
            make_recipe, operator, WITH_DEADLINE
        )
        now = timezone.now()
        # The second run's gate has waited longest (two hours; its deadline passed an hour
        # ago); the first run's opened twenty minutes ago.
        Gate.objects.filter(pk=late.pk).update(
            created_at=now - timedelta(hours=2), deadline_at=now - timedelta(hours=1)
        )
        Gate.objects.filter(pk=fresh.pk).update(
            created_at=now - timedelta(minutes=20), deadline_at=now + timedelta(minutes=40)
        )
        log_in(page, console_server, "otto")
        rows = page.locator("#inbox tr[data-gate-item]")
        expect(rows).to_have_count(2)
        expect(rows.nth(0)).to_contain_text(f"Run {longest_wait.pk}")
        expect(rows.nth(0)).to_contain_text("2 hours")
        expect(rows.nth(0).locator(".badge-overdue")).to_have_text("overdue")
        expect(rows.nth(1)).to_contain_text(f"Run {newer_wait.pk}")
        expect(rows.nth(1)).to_contain_text(re.compile(r"in 3\d\s+minutes"))
        mark_page(page)
        screenshot(page, "inbox-deadlines")

        assert sweep()["reminded"] == 1
        # The inbox refreshes on its own and says the reminder went out.
        expect(rows.nth(0)).to_contain_text("reminded")
        assert still_same_page(page)
        reminder = wait_for(lambda: receiver.requests, message="the reminder webhook")[0]
    assert reminder["verified"] and reminder["json"]["event"] == "gate_reminder"
    assert reminder["json"]["gate"]["id"] == late.pk
    assert "has waited 2 hours for a decision at ship" in reminder["json"]["summary"]

    # The gate's page, where the notification links: overdue, reminded, still decidable.
    page.goto(console_server + f"/runs/{longest_wait.pk}/gates/{late.pk}/")
    panel = page.locator("#gate-panel")
    expect(panel).to_contain_text("Overdue")
    expect(panel).to_contain_text("a reminder was sent")
    expect(panel.get_by_role("button", name="Approve")).to_be_visible()
    screenshot(page, "gate-overdue")
    page.goto(console_server + longest_wait.get_absolute_url())
    page.locator("details.events summary").click()
    expect(page.locator("#event-log")).to_contain_text(
        "the sweep sent a reminder: the gate at ship has waited 2 hours (gate_timeout)."
    )
    late.refresh_from_db()
    assert late.is_pending and late.reminded_at is not None


def test_the_gate_keys_in_the_inbox(live_worker, make_recipe, operator, console_server, page):
    runs, gates = waiting_gates(make_recipe, operator, PLAIN)
    # The inbox lists the gate that opened first first (the runs race to their gates).
    (first, first_gate), (second, second_gate) = sorted(
        zip(runs, gates, strict=True), key=lambda pair: (pair[1].created_at, pair[1].pk)
    )
    log_in(page, console_server, "otto")
    rows = page.locator("#inbox tr[data-gate-item]")
    expect(rows).to_have_count(2)

    page.keyboard.press("?")
    help_dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(help_dialog).to_be_visible()
    expect(help_dialog).to_contain_text("Accept the selected gate")
    screenshot(page, "keys-help")
    page.keyboard.press("Escape")
    expect(help_dialog).to_be_hidden()
    # The same list is one button away for anyone not using the keys.
    page.get_by_role("button", name="Keyboard shortcuts").click()
    expect(help_dialog).to_be_visible()
    page.keyboard.press("Escape")

    page.keyboard.press("j")
    expect(rows.nth(0)).to_have_class("selected")
    expect(rows.nth(0)).to_be_focused()
    expect(rows.nth(0)).to_have_attribute("aria-current", "true")
    page.keyboard.press("j")
    expect(rows.nth(1)).to_be_focused()
    page.keyboard.press("k")
    expect(rows.nth(0)).to_be_focused()
    label = re.compile(rf"^Run {first.pk}, release, ship, waiting (under a minute|\d+\s+minutes?)$")
    expect(rows.nth(0)).to_have_attribute("aria-label", label)

    # `a` asks once more in the inbox (the iteration is not on screen), then accepts.
    page.keyboard.press("a")
    status = page.locator("#keys-status")
    expect(status).to_contain_text("Press a again to accept")
    # Seen, not only read aloud: on screen, inside the window, readable.
    expect(status).to_be_visible()
    box = status.bounding_box()
    viewport = page.viewport_size
    assert box["width"] > 100 and box["height"] > 10
    assert 0 <= box["x"] and box["x"] + box["width"] <= viewport["width"]
    assert 0 <= box["y"] and box["y"] + box["height"] <= viewport["height"]
    screenshot(page, "keys-press-a-again")
    first_gate.refresh_from_db()
    assert first_gate.is_pending
    page.keyboard.press("a")
    expect(page.locator(".messages")).to_contain_text("Approved ship.")
    expect(rows).to_have_count(1)
    first_gate.refresh_from_db()
    assert (first_gate.status, first_gate.decider, first_gate.surface) == (
        "accepted",
        "otto",
        "console",
    )

    # `f` opens the remaining gate with its comment box ready; typing there fires no key.
    page.keyboard.press("j")
    page.keyboard.press("f")
    page.wait_for_url(f"**/runs/{second.pk}/gates/{second_gate.pk}/#feedback")
    box = page.locator(f"#comment-{second_gate.pk}")
    expect(box).to_be_focused()
    page.keyboard.type("ok, ship it after a quick check: j k f ?")
    expect(box).to_have_value("ok, ship it after a quick check: j k f ?")
    expect(page.get_by_role("dialog", name="Keyboard shortcuts")).to_be_hidden()
    second_gate.refresh_from_db()
    assert second_gate.is_pending
    page.keyboard.press("Escape")
    page.keyboard.press("a")  # an approval's comment is a note: it still accepts
    expect(page.locator("#gate-panel")).to_contain_text("by otto")
    second_gate.refresh_from_db()
    assert second_gate.status == "accepted"
    assert second_gate.comment == "ok, ship it after a quick check: j k f ?"


def test_the_gate_keys_on_a_run_page(live_worker, bundled, operator, console_server, page):
    run = services.start_run(
        bundled["guided-refine"], actor=Actor.operator(operator, "console"), message="a haiku"
    )
    wait_run(run, "paused")
    log_in(page, console_server, "otto")
    page.goto(console_server + run.get_absolute_url())
    panel = page.locator("#gate-panel")
    expect(panel.locator("[data-gate-primary]")).to_have_text("Accept & complete")
    mark_page(page)

    page.keyboard.press("f")
    feedback = page.locator("[data-gate-feedback]")
    expect(feedback).to_be_focused()
    page.keyboard.type("make it rhyme")
    page.keyboard.press("Escape")
    expect(feedback).not_to_be_focused()
    # With feedback written, `a` would not accept: it says so and sends nothing.
    page.keyboard.press("a")
    expect(page.locator("#keys-status")).to_contain_text("Feedback is written")
    expect(page.locator("#keys-status")).to_be_visible()
    gate = services.pending_gate(run)
    assert gate is not None and gate.iteration_number == 1

    feedback.fill("")
    feedback.blur()
    page.keyboard.press("a")
    expect(panel).to_contain_text("by otto")
    wait_run(run, "completed")
    assert still_same_page(page)
    assert run.gates.get().status == "accepted"
    screenshot(page, "keys-run-page")
