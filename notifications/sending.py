"""Sending one delivery: claimed by a conditional UPDATE (a duplicate message sends
nothing twice), tried through the transport, and recorded. A transient failure is tried
again later, each wait twice the one before, until LOOP_NOTIFY_MAX_ATTEMPTS."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from runs import dispatch

from . import transports
from .models import SEND_TASK, Delivery

# A claimed delivery not finished within this is the sweep's to send again.
LEASE_SECONDS = 120


def backoff_seconds(attempts: int) -> int:
    return settings.LOOP_NOTIFY_RETRY_SECONDS * 2 ** max(0, attempts - 1)


def send(delivery_id: int) -> str | None:
    """Try one delivery; returns its new status (None when another worker had it)."""
    now = timezone.now()
    delivery = Delivery.objects.claim(delivery_id, now, LEASE_SECONDS)
    if delivery is None:
        return None
    fence = Delivery.objects.filter(
        pk=delivery.pk, status=Delivery.Status.SENDING, attempts=delivery.attempts
    )
    try:
        if delivery.subscription_id:
            code = transports.send(delivery.subscription, delivery)
        else:  # an escalation: a mail to the person the recipe names, no subscription
            code = transports.send_email(None, delivery)
    except transports.TransportError as exc:
        if exc.permanent or delivery.attempts >= settings.LOOP_NOTIFY_MAX_ATTEMPTS:
            fence.update(
                status=Delivery.Status.FAILED,
                response_code=exc.code,
                error=str(exc)[:300],
                next_attempt_at=None,
            )
            return Delivery.Status.FAILED
        wait = backoff_seconds(delivery.attempts)
        if fence.update(
            status=Delivery.Status.PENDING,
            response_code=exc.code,
            error=str(exc)[:300],
            next_attempt_at=now + timedelta(seconds=wait),
        ):
            dispatch.send_later(SEND_TASK, wait, delivery.pk)
        return Delivery.Status.PENDING
    fence.update(
        status=Delivery.Status.DELIVERED,
        response_code=code,
        error="",
        delivered_at=timezone.now(),
        next_attempt_at=None,
    )
    return Delivery.Status.DELIVERED
