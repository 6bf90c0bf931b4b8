"""Waiting on a run until a person is needed or it ends, for a host agent that would
otherwise poll: `manage.py run wait`, GET /api/runs/{id}/wait and the MCP tool
`wait_for_run` all ask `wait_for_person`, so the three say the same four words
(`state_of`), and the command line's exit status for each is kept here (`EXIT_CODES`).

A wait listens to the run's live channel (`live.Waiter`) and reads the database, the
record, each time something is published and at least every `RECHECK_SECONDS`: a lost
publication costs a few seconds, never the answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from django.db import connection

from runs import live
from runs.inbox import needs_a_person_now
from runs.models import Run

# What a wait ends on: the run completed (a step machine's `approved` too: its status is
# completed), ended otherwise (failed, cancelled), needs a person (`needs_a_person_now`), or
# is still going when the time given has passed.
COMPLETED = "completed"
ENDED = "ended"
NEEDS_PERSON = "needs_person"
RUNNING = "running"
STATES = (COMPLETED, ENDED, NEEDS_PERSON, RUNNING)

# `manage.py run wait`'s exit status for each state. 1 is the command refused (no such run,
# a bad option: a CommandError) and 2 a usage error (argparse), as for every command.
EXIT_CODES = {COMPLETED: 0, ENDED: 3, NEEDS_PERSON: 4, RUNNING: 5}

# The API's and the MCP tool's long-poll: its default and its most (a web worker thread,
# and its pooled database connection between reads, are held that long at most).
DEFAULT_SECONDS = 30
MOST_SECONDS = 60

# The database is read again at least this often, whatever the live channel says...
RECHECK_SECONDS = 5
# ... and at most this often: a run's streamed output is published too (up to 20 chunks a
# second), and each wakes the waiter.
FEWEST_SECONDS_BETWEEN_READS = 0.25

T = TypeVar("T")


@dataclass(frozen=True)
class WaitResult:
    state: str  # one of STATES
    reason: str  # why, in a few words: the gate that waits, the error, ...
    run: Run

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.state]


def state_of(run: Run) -> tuple[str, str]:
    """(state, reason) for the run as it is now: the one rule every surface's wait uses."""
    if run.status == Run.Status.COMPLETED:
        return COMPLETED, run.status_meaning
    if run.is_terminal:
        return ENDED, run.error or run.status_meaning
    reason = needs_a_person_now(run)
    if reason is not None:
        return NEEDS_PERSON, reason
    return RUNNING, run.status_meaning


def wait_for_person(run: Run, timeout: float) -> WaitResult:
    """Block until the run needs a person or has ended, or `timeout` seconds have passed
    (then `running`). A run already there returns at once."""

    def settled(now: Run) -> WaitResult | None:
        state, reason = state_of(now)
        if state == NEEDS_PERSON:
            # The gate was read after the run: a pause committed in between shows its gate
            # but not yet its status. Read the run again, so the answer's run is the one
            # that waits (a run decided meanwhile is running again, and the wait goes on).
            now.refresh_from_db()
            state, reason = state_of(now)
        return None if state == RUNNING else WaitResult(state, reason, now)

    found = wait_until(run, timeout, settled)
    if found is not None:
        return found
    return WaitResult(RUNNING, f"still {run.status_word} after {timeout:g} s", run)


def wait_until(run: Run, timeout: float, settled: Callable[[Run], T]) -> T | None:
    """Read the run until `settled(run)` is something, and return it; None once `timeout`
    seconds have passed. Woken by the run's live channel, to which it subscribes before
    the first read: nothing published after that read is missed."""
    deadline = time.monotonic() + timeout
    waiter = live.Waiter(run.pk)
    try:
        while True:
            read_at = time.monotonic()
            run.refresh_from_db()
            found = settled(run)
            left = deadline - time.monotonic()
            if found or left <= 0:
                return found
            _give_back_connection()
            waiter.wait(min(left, RECHECK_SECONDS))
            pause = read_at + FEWEST_SECONDS_BETWEEN_READS - time.monotonic()
            if pause > 0:
                time.sleep(min(pause, max(deadline - time.monotonic(), 0)))
    finally:
        waiter.close()


def _give_back_connection() -> None:
    """A web process's pooled database connection goes back to its pool while the wait
    sleeps (the pool, LOOP_DB_POOL_SIZE, is the whole process's; long-polls must not hold
    it); the next read takes one again. A connection of its own (a command) is kept."""
    if connection.settings_dict.get("OPTIONS", {}).get("pool") and not connection.in_atomic_block:
        connection.close()
