"""Webhooks: signed with HMAC-SHA256 over timestamp + body, verified by a receiver this test
starts with the snippet docs/operations.md documents; tried again with back-off; every
delivery recorded, and a receiver's answer kept out of what anyone sees."""

from __future__ import annotations

import time

import pytest
from django.core.exceptions import ValidationError

from notifications import sending
from notifications.models import Delivery, Subscription
from runs import services
from runs.actor import ENGINE
from tests.conftest import wait_for, wait_run
from tests.notifications.conftest import APPROVAL, ONE_STEP
from tests.notifications.receiver import Receiver, documented_verifier


def hook(url, **fields) -> Subscription:
    return Subscription.objects.create(name="team hook", url=url, **fields)


def test_a_waiting_gate_reaches_the_webhook_signed_and_retried(live_worker, make_recipe, settings):
    """The worker opens the gate; the receiver first answers 503, then 200: the delivery is
    tried again after its back-off and recorded as delivered on the second attempt."""
    with Receiver(answers=(503, 200)) as receiver:
        sub = hook(receiver.url)
        receiver.secret = sub.secret
        run = services.start_run(make_recipe(APPROVAL, "ship-it"), actor=ENGINE, message="v1.2")
        wait_run(run, "paused")
        delivery = wait_for(
            lambda: Delivery.objects.filter(
                subscription=sub, status=Delivery.Status.DELIVERED
            ).first(),
            message="the delivery to succeed",
        )
    assert (delivery.event, delivery.attempts, delivery.response_code) == ("gate_waiting", 2, 200)
    assert [r["answered"] for r in receiver.requests] == [503, 200]
    assert all(r["verified"] for r in receiver.requests)
    first = receiver.requests[0]
    assert first["headers"]["X-Loop-Event"] == "gate_waiting"
    assert first["headers"]["X-Loop-Delivery"] == str(delivery.pk)
    assert first["headers"]["X-Loop-Signature"].startswith("sha256=")
    gate = services.pending_gate(run)
    body = first["json"]
    base = settings.LOOP_BASE_URL  # the worker's, from the same environment
    assert body["gate"]["url"] == f"{base}/runs/{run.pk}/gates/{gate.pk}/"
    assert body["gate"]["deadline"] == gate.deadline_at.isoformat()
    assert body["run"] == {
        "id": run.pk,
        "recipe": "ship-it",
        "status": "paused",
        "starter": run.starter,
        "url": f"{base}/runs/{run.pk}/",
    }
    assert "approve" not in first["body"].decode().replace("on_timeout", "")


def test_the_documented_snippet_refuses_a_changed_body_a_wrong_key_and_an_old_timestamp():
    from notifications.signing import signed_headers

    verify = documented_verifier()
    now = str(int(time.time()))
    body = b'{"event":"gate_waiting"}'
    headers = signed_headers("s3cret", now, body)
    assert verify("s3cret", headers, body)
    assert not verify("s3cret", headers, body + b" ")
    assert not verify("other", headers, body)
    old = str(int(time.time()) - 3600)
    assert not verify("s3cret", signed_headers("s3cret", old, body), body)


def test_a_finished_run_is_announced_to_the_recipes_subscription(live_worker, make_recipe):
    recipe = make_recipe(ONE_STEP, "say-hello")
    other = make_recipe(ONE_STEP.replace("say-hello", "other"), "other")
    with Receiver() as receiver, Receiver() as elsewhere:
        mine = hook(receiver.url, recipe=recipe, on_run_completed=True)
        hook(elsewhere.url, recipe=other, on_run_completed=True)
        receiver.secret = mine.secret
        run = services.start_run(recipe, actor=ENGINE, message="hi")
        wait_run(run, "completed")
        wait_for(lambda: Delivery.objects.filter(status="delivered").exists())
    assert [r["json"]["event"] for r in receiver.requests] == ["run_completed"]
    assert receiver.requests[0]["verified"]
    assert elsewhere.requests == []


@pytest.mark.django_db(transaction=True)
def test_a_refusal_fails_at_once_and_its_body_stays_out_of_the_record(make_recipe, monkeypatch):
    sent = []
    monkeypatch.setattr("runs.dispatch.deliver", lambda name, *args, **kw: sent.append(args))
    with Receiver(answers=(404,), body=b"internal detail: db=10.0.0.7") as receiver:
        sub = hook(receiver.url)
        run = services.start_run(make_recipe(ONE_STEP, "say-hello"), actor=ENGINE, message="hi")
        delivery = Delivery.objects.create(
            subscription=sub, event="run_failed", run=run, payload={"event": "run_failed"}
        )
        assert sending.send(delivery.pk) == Delivery.Status.FAILED
    delivery.refresh_from_db()
    assert (delivery.attempts, delivery.response_code) == (1, 404)
    assert delivery.error == "HTTP 404 Not Found"
    assert "10.0.0.7" not in str(Delivery.objects.filter(pk=delivery.pk).values().first())
    assert len(receiver.requests) == 1


@pytest.mark.django_db(transaction=True)
def test_a_server_error_is_tried_again_later_then_given_up(make_recipe, monkeypatch, settings):
    settings.LOOP_NOTIFY_MAX_ATTEMPTS = 2
    later = []
    monkeypatch.setattr(
        "runs.dispatch.deliver", lambda name, *args, countdown=None: later.append(countdown)
    )
    with Receiver(answers=(500,)) as receiver:
        sub = hook(receiver.url)
        delivery = Delivery.objects.create(subscription=sub, event="test", payload={})
        assert sending.send(delivery.pk) == Delivery.Status.PENDING
        assert later == [settings.LOOP_NOTIFY_RETRY_SECONDS]
        # Not due yet: a duplicate message finds nothing to do.
        assert sending.send(delivery.pk) is None
        Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at=None)
        assert sending.send(delivery.pk) == Delivery.Status.FAILED
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.error) == (
        "failed",
        2,
        "HTTP 500 Internal Server Error",
    )
    assert sending.backoff_seconds(3) == 4 * settings.LOOP_NOTIFY_RETRY_SECONDS


def test_a_webhook_host_must_be_allowed(db, settings):
    settings.LOOP_WEBHOOK_HOSTS = ["hooks.example.com"]
    sub = Subscription(name="x", url="http://169.254.169.254/latest/meta-data")
    with pytest.raises(ValidationError) as refused:
        sub.full_clean()
    assert "'169.254.169.254' is not an allowed webhook host" in str(refused.value)
    assert "LOOP_WEBHOOK_HOSTS" in str(refused.value)
    Subscription(name="ok", url="https://hooks.example.com/loop").full_clean()


@pytest.mark.django_db(transaction=True)
def test_a_host_taken_off_the_list_is_refused_at_send_time(settings, monkeypatch):
    monkeypatch.setattr("runs.dispatch.deliver", lambda *a, **k: None)
    with Receiver() as receiver:
        sub = hook(receiver.url)
        settings.LOOP_WEBHOOK_HOSTS = []
        delivery = Delivery.objects.create(subscription=sub, event="test", payload={})
        assert sending.send(delivery.pk) == Delivery.Status.FAILED
    assert receiver.requests == []
    delivery.refresh_from_db()
    assert "not an allowed webhook host" in delivery.error
