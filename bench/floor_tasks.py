"""The floors the engine is compared with: raw Celery chains where each task sends the next.

Loaded into every benchmark worker with `celery worker -I bench.floor_tasks`. The last
step of a chain writes the time it finished to Redis under `key`. The worker also touches
BENCH_READY_FILE once it consumes, so the benchmark knows when to start the clock.
"""

import os
import time
from pathlib import Path

import redis
from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.db import transaction
from django.db.models import F


@worker_ready.connect
def _announce_ready(**_):
    if os.environ.get("BENCH_READY_FILE"):
        Path(os.environ["BENCH_READY_FILE"]).touch()


def _finished(key: str) -> None:
    redis.Redis.from_url(settings.REDIS_URL).set(key, repr(time.time()), ex=3600)


@shared_task(name="bench.noop_step")
def noop_step(remaining: int, key: str) -> None:
    if remaining > 1:
        noop_step.delay(remaining - 1, key)
    else:
        _finished(key)


@shared_task(name="bench.transaction_step")
def transaction_step(remaining: int, key: str, run_id: int) -> None:
    """One transaction of two writes (a counter update and an event row), then the next
    step sent on commit, as the engine does."""
    from runs.models import Run, RunEvent

    with transaction.atomic():
        Run.objects.filter(pk=run_id).update(last_seq=F("last_seq") + 1)
        RunEvent.objects.create(run_id=run_id, seq=remaining, kind="bench_step")
        if remaining > 1:
            transaction.on_commit(lambda: transaction_step.delay(remaining - 1, key, run_id))
    if remaining == 1:
        _finished(key)
