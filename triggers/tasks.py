"""This app's Celery tasks, sent by their names: beat sends FIRE_TASK, a run's end (or the
sweep) START_QUEUED_TASK."""

from __future__ import annotations

from datetime import UTC, datetime

from celery import shared_task

from runs.executor.state import on_fresh_connection

from . import schedules
from .models import FIRE_TASK, START_QUEUED_TASK


@shared_task(name=FIRE_TASK, bind=True)
def fire_schedule(self, schedule_id: int) -> None:
    """One firing of a schedule, at the time beat sent it (triggers.schedules.fire)."""
    stamped = (getattr(self.request, "headers", None) or {}).get(schedules.SENT_HEADER)
    if stamped is None:
        stamped = getattr(self.request, schedules.SENT_HEADER, None)
    sent_at = datetime.fromtimestamp(float(stamped), UTC) if stamped is not None else None
    on_fresh_connection(schedules.fire, schedule_id, sent_at)


@shared_task(name=START_QUEUED_TASK)
def start_queued(schedule_id: int) -> None:
    on_fresh_connection(schedules.start_queued, schedule_id)
