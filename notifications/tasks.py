"""Notifications' Celery task and its sweep pass, handed to the kernel from
`NotificationsConfig.ready()` (`runs.kinds.add_task`, `runs.kinds.add_sweep_pass`): the
kernel sends `send_notification` by name through `runs.dispatch` and runs the pass with
its own, never importing this app."""

from __future__ import annotations

from celery import shared_task

from runs import dispatch
from runs.executor.state import on_fresh_connection

from . import sending
from .models import Delivery


# The name messages queued by earlier releases carry, when the task lived in runs.tasks.
@shared_task(name="runs.tasks.send_notification")
def send_notification(delivery_id: int) -> None:
    """One webhook or e-mail (notifications.sending): claimed, tried, recorded."""
    on_fresh_connection(sending.send, delivery_id)


def lost_notifications(now, stale, counts) -> None:
    """A sweep pass: deliveries due for a while that nobody sent are sent again (the claim
    is conditional, so a message that was only late sends nothing twice)."""
    for pk in Delivery.objects.lost(stale).values_list("pk", flat=True)[:500]:
        dispatch.send_now("send_notification", pk)
        counts["resent"] += 1
