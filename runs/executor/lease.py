"""Keep a claimed piece of work's lease alive while the worker does something slow that
prints nothing: recording a worktree's diff (git add, commit, diff), checking completion
signals in a long output, waiting before a retry.

Output streaming renews the lease as chunks arrive (runs/executor/stream.py); once the
agent has returned there are no chunks, so a helper thread renews it every
FLUSH_SECONDS until the block ends. Without it a sweep would take the work back as lost
after LOOP_LEASE_SECONDS and run it a second time, alongside this one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import contextmanager

from django.db import connections

from .stream import FLUSH_SECONDS

log = logging.getLogger(__name__)


@contextmanager
def keep_lease(renew: Callable[[], bool] | None, every: float = FLUSH_SECONDS):
    """Call `renew` (which returns False once the work is no longer ours) every `every`
    seconds on a helper thread while the block runs; `None` does nothing."""
    if renew is None:
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(every):
                try:
                    if not renew():
                        return  # cancelled or taken over: the work's own write will fail
                except Exception:  # a missed beat must not kill the work
                    log.warning("could not renew a lease", exc_info=True)
                    # A dropped connection stays broken in this thread until closed: the
                    # next beat opens a new one instead of failing until the lease lapses.
                    connections.close_all()
        finally:
            connections.close_all()  # this thread's own database connection

    thread = threading.Thread(target=beat, name="lease-keeper", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def renewer(on_chunk) -> Callable[[], bool] | None:
    """The lease renewal of an output stream (None for a plain callback)."""
    return getattr(on_chunk, "renew_lease", None)
