"""Notifications' Celery task and its sweep pass. The task is sent by its Celery name
(`SEND_TASK`) through `runs.dispatch`; the pass is handed to the kernel from
`NotificationsConfig.ready()` (`runs.kinds.add_sweep_pass`), which runs it with its own,
never importing this app."""

from __future__ import annotations

from celery import shared_task

from runs import dispatch
from runs.executor.state import on_fresh_connection

from . import sending
from .models import SEND_TASK, Delivery


@shared_task(name=SEND_TASK)
def send_notification(delivery_id: int) -> None:
    """One webhook or e-mail (notifications.sending): claimed, tried, recorded."""
    on_fresh_connection(sending.send, delivery_id)


# The name the task had while it lived in runs/tasks.py: a message queued under it before an
# upgrade still runs. Nothing sends it any more; drop it once no queue can hold one.
@shared_task(name="runs.tasks.send_notification")
def send_notification_under_old_name(delivery_id: int) -> None:
    send_notification(delivery_id)


def lost_notifications(now, stale, counts) -> None:
    """A sweep pass: deliveries due for a while that nobody sent are sent again (the claim
    is conditional, so a message that was only late sends nothing twice)."""
    for pk in Delivery.objects.lost(stale).values_list("pk", flat=True)[:500]:
        dispatch.send_now(SEND_TASK, pk)
        counts["resent"] += 1
