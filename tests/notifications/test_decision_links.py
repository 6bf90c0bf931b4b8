"""Signed decision links in mails (notifications/links.py), through a real SMTP server on
127.0.0.1 (aiosmtpd) and Django's SMTP backend: the mail carries one link per decision for
its named recipient; opening one decides nothing; confirming decides once, as that person,
on what they were sent; a used, expired, tampered, revoked or foreign link, a recipient
without the operator role and changed content are each refused with a page saying which."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import Group
from django.core import signing
from django.test import Client
from django.utils import timezone

from notifications import links
from notifications.models import DecisionLink, Delivery, Subscription
from runs import services
from runs.actor import ENGINE
from runs.executor.sweep import sweep
from runs.models import GateResponse
from tests.conftest import make_user
from tests.notifications.smtp import mailbox_fixture  # noqa: F401 - `mailbox`

pytestmark = pytest.mark.django_db(transaction=True)

SHIP_OR_HOLD = """
name: ship-or-hold
nodes:
  - id: decide
    approval:
      message: Ship v2 to everyone?
      gate_timeout: 2h
      decisions: [{id: ship, label: Ship}, {id: hold, label: Hold}]
"""


@pytest.fixture
def otto(operator):
    operator.email = "otto@example.com"
    operator.save()
    return operator


def mailed_gate(make_recipe, drain, person):
    """A run waiting at `decide`, its mail to `person` sent; returns (run, gate)."""
    Subscription.objects.create(name="gates", channel="email", user=person)
    run = services.start_run(make_recipe(SHIP_OR_HOLD, "ship-or-hold"), ENGINE, message="v2")
    drain()
    return run, services.pending_gate(run)


def received_links(inbox, address: str) -> dict[str, str]:
    return inbox.paths_to(address)


def confirm(path: str, text: str = ""):
    """Open the link's page in a browser-like client (CSRF enforced) and press Confirm. A
    refused link's page has no form: its POST stands for one sent from a page loaded
    before the link was refused (a valid CSRF token, so only the link can refuse it)."""
    client = Client(enforce_csrf_checks=True)
    page = client.get(path)
    token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.content)
    if token is None:
        return Client().post(path, {"text": text})
    return client.post(path, {"csrfmiddlewaretoken": token.group(1).decode(), "text": text})


def test_the_mail_carries_a_link_per_decision_that_decides_exactly_once(
    make_recipe, in_process, mailbox, otto, client
):
    run, gate = mailed_gate(make_recipe, in_process, otto)
    message = mailbox.to("otto@example.com")[0]
    assert message["Subject"].startswith(f"[Loop Console] Run {run.pk} (ship-or-hold) waits")
    body = message.get_body(preferencelist=("plain",)).get_content()
    assert "no link in this message decides" not in body
    found = received_links(mailbox, "otto@example.com")
    assert list(found) == ["Ship", "Hold", "Reject"]
    made = DecisionLink.objects.filter(gate=gate, recipient=otto)
    assert sorted(made.values_list("decision", flat=True)) == ["hold", "reject", "ship"]
    assert {link.digest for link in made} == {gate.digest}
    assert {link.delivery_id for link in made} == {Delivery.objects.get().pk}

    decided = confirm(found["Ship"])
    assert decided.status_code == 200, decided.content.decode()
    assert "Decided: Ship" in decided.content.decode()
    gate.refresh_from_db()
    assert (gate.status, gate.decision, gate.decider, gate.surface) == (
        "accepted",
        "ship",
        "otto",
        "link",
    )
    answer = GateResponse.objects.get(gate=gate)
    assert (answer.decision, answer.via, answer.digest) == ("ship", "link", gate.digest)
    in_process()
    run.refresh_from_db()
    assert run.status == "completed"

    again = confirm(found["Ship"])
    assert again.status_code == 410 and "This link was used" in again.content.decode()
    other = client.get(found["Hold"])
    assert other.status_code == 409 and "already decided" in other.content.decode()
    assert GateResponse.objects.filter(gate=gate).count() == 1


def test_opening_a_link_decides_nothing(make_recipe, in_process, mailbox, otto, client):
    run, gate = mailed_gate(make_recipe, in_process, otto)
    path = received_links(mailbox, "otto@example.com")["Hold"]
    for _ in range(3):  # a mail scanner, a preview, the person
        page = client.get(path)
        assert page.status_code == 200
    text = page.content.decode()
    assert "Confirm: Hold" in text and "Ship v2 to everyone?" in text and "otto" in text
    assert client.head(path).status_code == 405
    without_token = Client(enforce_csrf_checks=True).post(path, {"text": ""})
    assert without_token.status_code == 403
    gate.refresh_from_db()
    assert gate.is_pending and not GateResponse.objects.filter(gate=gate).exists()
    assert not DecisionLink.objects.filter(gate=gate, used_at__isnull=False).exists()


def test_a_link_expires_with_the_gate_s_deadline_or_its_hours(
    make_recipe, in_process, mailbox, otto, client, settings
):
    settings.LOOP_DECISION_LINK_HOURS = 1
    run, gate = mailed_gate(make_recipe, in_process, otto)
    link = DecisionLink.objects.filter(gate=gate, decision="ship").get()
    hour = link.created_at + timezone.timedelta(hours=1)
    assert link.expires_at == hour < gate.deadline_at  # 1 h, sooner than the 2 h deadline
    assert links.expiry(gate, gate.deadline_at - timezone.timedelta(minutes=5)) == gate.deadline_at

    path = received_links(mailbox, "otto@example.com")["Ship"]
    DecisionLink.objects.filter(gate=gate).update(expires_at=timezone.now())
    page = client.get(path)
    assert page.status_code == 410 and "This link has expired" in page.content.decode()
    assert confirm(path).status_code == 410
    gate.refresh_from_db()
    assert gate.is_pending


def test_a_changed_or_foreign_token_is_refused(make_recipe, in_process, mailbox, otto, client):
    run, gate = mailed_gate(make_recipe, in_process, otto)
    path = received_links(mailbox, "otto@example.com")["Ship"]
    token = path.split("/")[2]
    link = DecisionLink.objects.get(gate=gate, decision="ship")
    flipped = token[:-1] + ("A" if token[-1] != "A" else "B")
    other_row = signing.b64_encode(str(link.pk + 1000).encode()).decode()
    tampered = [
        flipped,  # one character of the signature
        other_row + token[token.index(":") :],  # the signature of another row's token
        signing.dumps(link.pk, salt=links.SALT, key="another install's key"),
        signing.dumps(link.pk),  # signed by this console, but not as a decision link
    ]
    for bad in tampered:
        for response in (client.get(f"/decide/{bad}/"), confirm(f"/decide/{bad}/")):
            assert response.status_code == 404, bad
            assert "This link is not valid" in response.content.decode()
    gate.refresh_from_db()
    assert gate.is_pending and link.used_at is None


def test_a_revoked_link_is_refused(make_recipe, in_process, mailbox, otto, client, admin_user):
    run, gate = mailed_gate(make_recipe, in_process, otto)
    found = received_links(mailbox, "otto@example.com")
    DecisionLink.objects.get(gate=gate, decision="ship").revoke()
    page = client.get(found["Ship"])
    assert page.status_code == 410 and "This link was revoked" in page.content.decode()
    assert client.get(found["Hold"]).status_code == 200  # the others still work

    admin = Client()
    admin.force_login(admin_user)
    one = DecisionLink.objects.get(gate=gate, decision="hold")
    admin.post(
        "/admin/notifications/decisionlink/",
        {"action": "revoke_all_of_recipients", "_selected_action": [one.pk]},
    )
    assert not DecisionLink.objects.filter(recipient=otto).live().exists()
    assert confirm(found["Hold"]).status_code == 410
    assert links.revoke_all_for(otto) == 0  # nothing left to revoke
    gate.refresh_from_db()
    assert gate.is_pending


def test_a_recipient_who_lost_the_operator_role_is_refused(
    make_recipe, in_process, mailbox, otto, client
):
    run, gate = mailed_gate(make_recipe, in_process, otto)
    path = received_links(mailbox, "otto@example.com")["Ship"]
    otto.groups.clear()
    page = client.get(path)
    assert page.status_code == 403
    assert "otto, who no longer holds the operator role" in page.content.decode()
    assert confirm(path).status_code == 403
    gate.refresh_from_db()
    assert gate.is_pending


def test_a_link_of_a_run_that_was_cancelled_is_refused(
    make_recipe, in_process, mailbox, otto, client
):
    run, gate = mailed_gate(make_recipe, in_process, otto)
    path = received_links(mailbox, "otto@example.com")["Ship"]
    services.cancel_run(run, ENGINE, reason="not this release")
    page = client.get(path)
    text = page.content.decode()
    assert page.status_code == 409 and "This gate no longer waits" in text
    assert f"run {run.pk} is cancelled" in text
    assert confirm(path).status_code == 409
    assert not GateResponse.objects.filter(gate=gate).exists()


def test_a_viewer_s_mail_has_no_links(make_recipe, in_process, mailbox, viewer):
    viewer.email = "vera@example.com"
    viewer.save()
    mailed_gate(make_recipe, in_process, viewer)
    assert received_links(mailbox, "vera@example.com") == {}
    body = mailbox.to("vera@example.com")[0].get_body(preferencelist=("plain",))
    assert "sign in and press a button" in body.get_content()
    assert not DecisionLink.objects.exists()


def test_a_link_made_on_content_that_changed_is_refused_saying_what(
    make_recipe, in_process, mailbox, otto, client
):
    run, gate = mailed_gate(make_recipe, in_process, otto)
    path = received_links(mailbox, "otto@example.com")["Ship"]
    artifacts = Path(django_settings.LOOP_DATA_DIR) / "runs" / str(run.pk) / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    (artifacts / "report.md").write_text("written after the mail was sent\n")

    page = client.get(path)
    text = page.content.decode()
    assert page.status_code == 409 and "What you were asked about has changed" in text
    assert "<li>the artifact report.md</li>" in text
    posted = confirm(path)
    assert posted.status_code == 409 and "the artifact report.md" in posted.content.decode()
    gate.refresh_from_db()
    assert gate.is_pending and not GateResponse.objects.filter(gate=gate).exists()
    assert DecisionLink.objects.get(gate=gate, decision="ship").used_at is None


def test_a_decision_that_needs_text_asks_for_it(make_recipe, in_process, mailbox, otto):
    run, gate = mailed_gate(make_recipe, in_process, otto)
    path = received_links(mailbox, "otto@example.com")["Reject"]
    empty = confirm(path, text="")
    assert empty.status_code == 400 and "Say why you reject" in empty.content.decode()
    assert DecisionLink.objects.get(gate=gate, decision="reject").used_at is None
    rejected = confirm(path, text="not this week")
    assert rejected.status_code == 200
    gate.refresh_from_db()
    assert (gate.status, gate.comment, gate.surface) == ("rejected", "not this week", "link")


ESCALATING = """
name: escalating
nodes:
  - id: decide
    approval:
      message: Ship v2 to everyone?
      decisions: [{id: ship, label: Ship}, {id: hold, label: Hold}]
      gate_timeout: 30m
      escalate_to: [release-managers, sam]
      escalate_after: 2h
"""


def test_escalation_mails_each_operator_it_names_their_own_links(
    make_recipe, in_process, mailbox, django_user_model
):
    managers = Group.objects.create(name="release-managers")
    rita = make_user(django_user_model, "rita", "operator", email="rita@example.com")
    rita.groups.add(managers)
    make_user(django_user_model, "vic", "viewer", email="vic@example.com").groups.add(managers)
    make_user(django_user_model, "nomail", "operator").groups.add(managers)
    make_user(django_user_model, "sam", "operator", email="sam@example.com")
    run = services.start_run(make_recipe(ESCALATING, "escalating"), ENGINE, message="v2")
    in_process()
    gate = services.pending_gate(run)
    assert sweep(now=gate.deadline_at + timezone.timedelta(seconds=1))["escalated"] == 1
    in_process()

    escalated = Delivery.objects.filter(event="gate_escalated")
    assert sorted(d.recipient.username for d in escalated) == ["rita", "sam"]
    assert {d.status for d in escalated} == {"delivered"}
    assert mailbox.to("vic@example.com") == []
    assert "Escalated to you" in mailbox.to("rita@example.com")[0]["Subject"]
    rita_links = received_links(mailbox, "rita@example.com")
    sam_links = received_links(mailbox, "sam@example.com")
    assert list(sam_links) == ["Ship", "Hold", "Reject"] and rita_links["Ship"] != sam_links["Ship"]
    assert confirm(sam_links["Hold"]).status_code == 200
    gate.refresh_from_db()
    assert (gate.decision, gate.decider, gate.surface) == ("hold", "sam", "link")
    assert confirm(rita_links["Ship"]).status_code == 409


def test_a_webhook_its_person_set_up_carries_their_links(make_recipe, in_process, otto, admin_user):
    """A webhook of a person's own subscription carries their links; one an administrator
    set up for them carries none (a link decides as its person: only they say where it
    goes). The admin records who made each subscription."""
    from tests.notifications.receiver import Receiver

    with Receiver() as theirs, Receiver() as made_for_them:
        own = Subscription.objects.create(
            name="mine", channel="webhook", url=theirs.url, user=otto, created_by=otto
        )
        theirs.secret = own.secret
        Subscription.objects.create(
            name="for otto",
            channel="webhook",
            url=made_for_them.url,
            user=otto,
            created_by=admin_user,
        )
        run = services.start_run(make_recipe(SHIP_OR_HOLD, "ship-or-hold"), ENGINE, message="v2")
        in_process()
    body = theirs.requests[0]["json"]
    assert theirs.requests[0]["verified"]
    assert [(d["decision"], d["as"]) for d in body["decide"]] == [
        ("ship", "otto"),
        ("hold", "otto"),
        ("reject", "otto"),
    ]
    assert "decide" not in made_for_them.requests[0]["json"]
    ship = next(d["url"] for d in body["decide"] if d["decision"] == "ship")
    decided = confirm(urlsplit(ship).path)
    assert decided.status_code == 200, decided.content.decode()
    gate = run.gates.get()
    assert (gate.decision, gate.decider, gate.surface) == ("ship", "otto", "link")

    browser = Client()
    browser.force_login(admin_user)
    browser.post(
        "/admin/notifications/subscription/add/",
        {
            "name": "by the admin",
            "channel": "webhook",
            "url": theirs.url,
            "user": otto.pk,
            "secret": "s",
            "on_gate_waiting": "on",
            "enabled": "on",
        },
    )
    assert Subscription.objects.get(name="by the admin").created_by == admin_user
