"""A gate decided from a mail on a 390 px phone: the mail, received by a real SMTP server,
carries a link; Chromium opens it (no login), confirms, and sees the decision; the run
goes on in the worker. Nothing on the page scrolls sideways."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from notifications import events, sending
from notifications.models import Delivery, Subscription
from runs import services
from runs.actor import ENGINE
from tests.browser.conftest import screenshot
from tests.conftest import pending_gate, wait_for, wait_run
from tests.notifications.smtp import mailbox_fixture  # noqa: F401 - `mailbox`

pytestmark = pytest.mark.browser

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
SHOTS = Path("/tmp/shots")
NO_SIDEWAYS_SCROLL = "document.documentElement.scrollWidth <= window.innerWidth"

SHIP_OR_HOLD = """
name: ship-or-hold
nodes:
  - id: decide
    approval:
      message: Ship v2 to everyone? The release notes are in the run's artifacts.
      gate_timeout: 2h
      decisions: [{id: ship, label: Ship}, {id: hold, label: Hold}]
"""


def mail_the_gate(run, gate, person) -> None:
    """The worker's step of mailing `person` about the gate, called here so that the mail
    reaches this test's SMTP server (the session's worker sends to none)."""
    subscription = Subscription.objects.create(name="gates", channel="email", user=person)
    delivery = Delivery.objects.create(
        subscription=subscription,
        event="gate_waiting",
        run=run,
        gate=gate,
        payload=events.payload("gate_waiting", run, gate),
        next_attempt_at=timezone.now(),
    )
    assert sending.send(delivery.pk) == Delivery.Status.DELIVERED


def test_a_gate_decided_from_a_mail_link_on_a_phone(
    live_worker, console_server, chromium, mailbox, make_recipe, operator, settings
):
    settings.LOOP_BASE_URL = console_server  # the links the mail carries lead here
    operator.email = "otto@example.com"
    operator.save()
    run = services.start_run(make_recipe(SHIP_OR_HOLD, "ship-or-hold"), ENGINE, message="v2")
    wait_run(run, "paused")
    gate = wait_for(lambda: pending_gate(run), message="the gate")
    mail_the_gate(run, gate, operator)
    link = mailbox.links_to("otto@example.com")["Ship"]

    context = chromium.new_context(**PHONE)
    page = context.new_page()
    page.goto(link)
    expect(page.locator("h1")).to_have_text("Ship?")
    expect(page.get_by_text("Ship v2 to everyone?")).to_be_visible()
    assert page.evaluate(NO_SIDEWAYS_SCROLL)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "decision-link-390-confirm.png"), full_page=True)
    gate.refresh_from_db()
    assert gate.is_pending  # opening the link decided nothing

    page.get_by_role("button", name="Confirm: Ship").click()
    expect(page.locator("h1")).to_have_text("Decided: Ship")
    expect(page.locator("[role=status]")).to_contain_text("By otto through a decision link")
    assert page.evaluate(NO_SIDEWAYS_SCROLL)
    page.screenshot(path=str(SHOTS / "decision-link-390.png"), full_page=True)
    screenshot(page, "decision-link-390")
    wait_run(run, "completed")
    gate.refresh_from_db()
    assert (gate.decision, gate.decider, gate.surface) == ("ship", "otto", "link")

    page.goto(link)  # the same link again
    expect(page.locator("h1")).to_have_text("This link was used")
    assert page.evaluate(NO_SIDEWAYS_SCROLL)
    page.screenshot(path=str(SHOTS / "decision-link-390-used.png"), full_page=True)
    context.close()
