"""E-mail through Django's mail backend, who a notification goes to, the gate page it links
to (looking never decides: deciding is a POST by a signed-in operator), and the admin's
read-only record of deliveries."""

from __future__ import annotations

import pytest
from django.core import mail

from notifications import sending
from notifications.models import Delivery, Subscription
from runs import services
from runs.actor import ENGINE, Actor
from runs.models import Gate
from tests.notifications.conftest import APPROVAL

pytestmark = pytest.mark.django_db(transaction=True)


def gated(make_recipe, drain, user=None):
    actor = Actor.operator(user, "console") if user is not None else ENGINE
    run = services.start_run(make_recipe(APPROVAL, "ship-it"), actor, message="v2")
    drain()
    return run, services.pending_gate(run)


def test_an_email_links_to_the_gate_page_and_decides_nothing(make_recipe, in_process, viewer):
    viewer.email = "vera@example.com"
    viewer.save()
    Subscription.objects.create(name="vera's gates", channel="email", user=viewer)
    run, gate = gated(make_recipe, in_process)
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["vera@example.com"]
    assert message.subject == (
        f"[Loop Console] Run {run.pk} (ship-it) waits for a decision at ship. "
        "Decide within 2 hours."
    )
    assert f"/runs/{run.pk}/gates/{gate.pk}/" in message.body
    assert "approve" not in message.body.lower()
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.response_code) == ("delivered", 1, None)


def test_who_hears_about_a_run(make_recipe, in_process, viewer, outsider, operator):
    viewer.email, outsider.email = "vera@example.com", "oscar@example.com"
    viewer.save()
    outsider.save()
    Subscription.objects.create(name="no role", channel="email", user=outsider)
    Subscription.objects.create(name="mine", channel="email", user=viewer, only_own_runs=True)
    Subscription.objects.create(name="off", channel="email", email="x@example.com", enabled=False)
    Subscription.objects.create(
        name="finished only", channel="email", email="y@example.com", on_gate_waiting=False
    )
    gated(make_recipe, in_process, user=operator)
    assert Delivery.objects.count() == 0 and mail.outbox == []


def test_a_mail_server_that_is_down_is_recorded(make_recipe, in_process, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", 9, 2
    settings.LOOP_NOTIFY_MAX_ATTEMPTS = 1
    Subscription.objects.create(name="ops", channel="email", email="ops@example.com")
    gated(make_recipe, in_process)
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("failed", 1)
    assert delivery.error == "mail server: ConnectionRefusedError"
    assert mail.outbox == []


def test_the_gate_page_shows_the_gate_and_looking_decides_nothing(
    make_recipe, in_process, client, viewer, operator
):
    run, gate = gated(make_recipe, in_process)
    url = f"/runs/{run.pk}/gates/{gate.pk}/"
    anonymous = client.get(url)
    assert anonymous.status_code == 302 and "/accounts/login/?next=" in anonymous["Location"]
    client.force_login(viewer)
    page = client.get(url)
    assert page.status_code == 200
    text = page.content.decode()
    assert "Waiting for a decision at <code>ship</code>" in text
    assert "Decide by" in text and "then a reminder is sent" in text
    assert client.get(url + "approve/").status_code == 405
    gate.refresh_from_db()
    assert gate.is_pending
    client.force_login(operator)
    client.post(url + "approve/", {"comment": ""})
    gate.refresh_from_db()
    assert gate.status == Gate.Status.ACCEPTED and gate.decider == "otto"
    decided = client.get(url).content.decode()
    assert "by <strong>otto</strong>" in decided
    assert client.get(f"/runs/{run.pk}/gates/999999/").status_code == 404


def test_deliveries_are_read_only_in_the_admin(client, admin_user, make_recipe, in_process):
    sub = Subscription.objects.create(name="ops", channel="email", email="ops@example.com")
    gated(make_recipe, in_process)
    delivery = Delivery.objects.get()
    client.force_login(admin_user)
    listing = client.get("/admin/notifications/delivery/").content.decode()
    assert "gate_waiting" in listing and "delivered" in listing
    assert client.get("/admin/notifications/delivery/add/").status_code == 403
    detail = client.get(f"/admin/notifications/delivery/{delivery.pk}/change/")
    assert detail.status_code == 200 and b'name="_save"' not in detail.content
    assert client.post(f"/admin/notifications/delivery/{delivery.pk}/delete/").status_code == 403
    refused = client.post(
        "/admin/notifications/subscription/add/",
        {
            "name": "bad",
            "channel": "webhook",
            "url": "http://10.0.0.7/hook",
            "secret": "k",
            "enabled": "on",
        },
    )
    assert "is not an allowed webhook host" in refused.content.decode()
    assert sending.send(delivery.pk) is None  # delivered: nothing to do again
    assert sub.deliveries.count() == 1


def test_a_subscription_s_person_is_picked_by_name(client, admin_user, viewer):
    client.force_login(admin_user)
    form = client.get("/admin/notifications/subscription/add/").content.decode()
    box = form.split('name="user"', 1)[0].rsplit("<", 1)[1] + form.split('name="user"', 1)[1][:300]
    assert box.startswith("select") and "admin-autocomplete" in box  # not a raw id box
    found = client.get(
        "/admin/autocomplete/",
        {
            "term": "ver",
            "app_label": "notifications",
            "model_name": "subscription",
            "field_name": "user",
        },
    ).json()
    assert [r["text"] for r in found["results"]] == ["vera"]


def test_the_api_and_the_cli_show_the_deadline(make_recipe, in_process, viewer):
    from io import StringIO

    from django.core.management import call_command

    from tests.api.conftest import client_for

    run, gate = gated(make_recipe, in_process)
    shown = client_for(viewer).get(f"/api/runs/{run.pk}").body["pending_gate"]
    assert shown["on_timeout"] == "remind" and shown["reminded_at"] is None
    assert shown["deadline_at"].startswith(gate.deadline_at.strftime("%Y-%m-%dT%H:%M:%S"))
    out = StringIO()
    call_command("run", "status", str(run.pk), stdout=out)
    assert f"decide by {gate.deadline_at.isoformat()}; then a reminder is sent" in out.getvalue()


PARALLEL = """
name: two-approvals
nodes:
  - id: legal
    approval: {message: Legal ok?, gate_timeout: 1h}
  - id: design
    approval: {message: Design ok?}
"""


def test_a_run_page_lists_every_gate_it_waits_at(make_recipe, in_process, client, viewer):
    run = services.start_run(make_recipe(PARALLEL, "two-approvals"), actor=ENGINE, message="x")
    in_process()
    first, second = run.gates.order_by("id")
    client.force_login(viewer)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert page.count("data-gate-item") == 2  # the panel and the other gate: stops for j / k
    assert "Also waiting in this run" in page
    listed = [
        g for g in (first, second) if f'data-gate-page="/runs/{run.pk}/gates/{g.pk}/"' in page
    ]
    assert len(listed) == 1
    # Each gate's own page lists the other one.
    for this, that in ((first, second), (second, first)):
        other = client.get(f"/runs/{run.pk}/gates/{this.pk}/").content.decode()
        assert f'data-gate-page="/runs/{run.pk}/gates/{that.pk}/"' in other
        assert f'data-gate-page="/runs/{run.pk}/gates/{this.pk}/"' not in other
    assert first.node_id == "legal" and "deadline in" in other
