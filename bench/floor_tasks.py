"""The floors the engine is compared with: raw Celery chains where each task sends the next.

Loaded into every benchmark worker with `celery worker -I bench.floor_tasks`. The last
step of a chain writes the time it finished to Redis under `key`. The worker also touches
BENCH_READY_FILE once it consumes, so the benchmark knows when to start the clock.

BENCH_DB_POOL=1 in a worker's environment turns on psycopg's connection pool for it
(Django's OPTIONS["pool"]), to measure the pool against CELERY_DB_REUSE_MAX.
"""

import os
import time
from pathlib import Path

import psycopg
import redis
from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.db import transaction
from django.db.models import F

if os.environ.get("BENCH_DB_POOL") == "1":
    # Imported by the worker before any connection is opened: the settings still apply.
    settings.DATABASES["default"]["CONN_MAX_AGE"] = 0  # Django's pool refuses persistence
    settings.DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": 4,
    }


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


_raw_connection: psycopg.Connection | None = None


def _raw() -> psycopg.Connection:
    """One psycopg connection per worker process, opened once and kept: the floor."""
    global _raw_connection
    if _raw_connection is None or _raw_connection.closed:
        _raw_connection = psycopg.connect(os.environ["DATABASE_URL"])
    return _raw_connection


@shared_task(name="bench.raw_transaction_step")
def raw_transaction_step(remaining: int, key: str, run_id: int) -> None:
    """The same two writes in one transaction as `transaction_step`, in plain SQL over a
    persistent connection; the next step is sent after the commit."""
    from runs.models import Run, RunEvent

    conn = _raw()
    with conn.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Run._meta.db_table} SET last_seq = last_seq + 1 WHERE id = %s", [run_id]
        )
        cursor.execute(
            f"INSERT INTO {RunEvent._meta.db_table} (run_id, seq, kind, step, data, created_at)"
            " VALUES (%s, %s, 'bench_step', '', '{}', now())",
            [run_id, remaining],
        )
    conn.commit()
    if remaining > 1:
        raw_transaction_step.delay(remaining - 1, key, run_id)
    else:
        _finished(key)
