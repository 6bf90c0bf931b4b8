"""The one way the console's code sends work to the workers (Celery beat sends the periodic
sweep itself: console/settings.py, CELERY_BEAT_SCHEDULE).

Everything that sends a task calls `send_on_commit` (inside a transaction: the message
leaves only once the rows it names are committed), `send_now` (outside one: the sweep
re-sending lost work) or `send_later` (a retry's back-off). All end in `deliver`, the
single seam tests replace.

A message sent on commit that the broker does not take (Redis down) is not an error of
the work that committed: the rows say what is due, and the sweep sends every such message
again (docs/architecture.md, "What wakes each kind"). So it is logged as a warning, noted
for whoever asked (`noting_unsent`: the command line says "done, message delayed"), and
the caller goes on.

The continuation fast path lives here too. While a `run_iteration` task runs an iteration
inside `chain`, the first `run_iteration` that iteration's transaction queues is handed
back to the task instead of being sent, and the task runs it at once: no broker round trip,
no task set-up. The handed-over iteration is still a committed pending row, claimed by the
same conditional UPDATE as any other, and the sweep re-sends it if the worker dies first.
After CHAIN_SECONDS (a real agent's single iteration uses that up) or when an iteration
raises, the next one goes through the broker like everything else, so one run cannot hold
a worker while other runs wait. It stays because it pays: docs/performance.md ("The
continuation fast path") has the engine with and without it beside its honest floor (a
persistent-connection transaction chain), and tests/kernel/test_dispatch.py pins each of
these rules.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager

from django.db import transaction
from kombu.exceptions import KombuError
from redis.exceptions import RedisError

# How long one task may keep running the iterations its own iterations create.
CHAIN_SECONDS = 0.5
CHAINED_TASK = "run_iteration"

_local = threading.local()
log = logging.getLogger(__name__)
# The broker out of reach (kombu wraps most of these; a raw socket error may come through).
BROKER_ERRORS = (KombuError, RedisError, ConnectionError)


def task(task_name: str):
    """The Celery task sent as `task_name`: the kernel's by its short name (runs.tasks), any
    other app's by the name it is registered under in Celery (a step machine's
    `stepmachine.tick_machine`)."""
    from celery import current_app

    from runs import tasks

    found = getattr(tasks, task_name, None)
    if hasattr(found, "delay"):
        return found
    if task_name not in current_app.tasks:
        # Outside a worker (the web process, a command) nothing has imported the apps'
        # `tasks` modules yet: Celery's autodiscovery does, as a worker's start would.
        current_app.autodiscover_tasks(force=True)
    try:
        return current_app.tasks[task_name]
    except KeyError:
        raise LookupError(f"no task named {task_name!r}") from None


def deliver(task_name: str, *args, countdown: float | None = None) -> None:
    """Hand one message to the broker: the only place the console's code does (beat aside)."""
    if countdown:
        task(task_name).apply_async(args, countdown=countdown)
    else:
        task(task_name).delay(*args)


def send_now(task_name: str, *args) -> None:
    deliver(task_name, *args)


def send_later(task_name: str, seconds: float, *args) -> None:
    """Send after `seconds` (a retry's back-off). The row the task reads says when it is
    due, so an early or duplicate message does nothing and the sweep re-sends a lost one."""
    deliver(task_name, *args, countdown=seconds)


def send_on_commit(task_name: str, *args) -> None:
    """Send once the current transaction commits (never, if it rolls back)."""
    next_in_chain = getattr(_local, "next_in_chain", None)
    if next_in_chain is not None and next_in_chain.take(task_name, args):
        return
    transaction.on_commit(lambda: _deliver_committed(task_name, *args))


def _deliver_committed(task_name: str, *args) -> None:
    """Send what committed rows say is due; the broker out of reach is not the work's error:
    the sweep sends the message again from those rows."""
    try:
        deliver(task_name, *args)
    except BROKER_ERRORS as exc:
        log.warning(
            "broker unreachable: %s%r not sent after its commit (%r); the sweep sends it again",
            task_name,
            args,
            exc,
        )
        unsent = getattr(_local, "unsent", None)
        if unsent is not None:
            unsent.append((task_name, args))


@contextmanager
def noting_unsent():
    """Collect, in the list it yields, the messages this thread's commits could not send."""
    _local.unsent = []
    try:
        yield _local.unsent
    finally:
        _local.unsent = None


class NextInChain:
    """Holds the next iteration a running iteration queued, for `chain` to run next."""

    def __init__(self):
        self.taken = False
        self.next_id: int | None = None

    def __enter__(self):
        _local.next_in_chain = self
        return self

    def __exit__(self, *exc):
        _local.next_in_chain = None

    def take(self, task_name: str, args: tuple) -> bool:
        if self.taken or task_name != CHAINED_TASK:
            return False
        self.taken = True
        transaction.on_commit(lambda: setattr(self, "next_id", args[0]))
        return True


def chain(first_id: int, run_one: Callable[[int], None]) -> int:
    """Run `run_one(first_id)`, then the iterations it queues while they are quick.

    Returns how many iterations ran in this task."""
    deadline = time.monotonic() + CHAIN_SECONDS
    next_id: int | None = first_id
    count = 0
    while next_id is not None:
        with NextInChain() as queued:
            try:
                run_one(next_id)
            except BaseException:
                if queued.next_id is not None:
                    _deliver_committed(CHAINED_TASK, queued.next_id)
                raise
        count += 1
        next_id = queued.next_id
        if next_id is not None and time.monotonic() >= deadline:
            # Its row is committed, like any message sent on commit: guarded the same way.
            _deliver_committed(CHAINED_TASK, next_id)
            return count
    return count
