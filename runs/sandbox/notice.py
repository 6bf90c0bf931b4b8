"""A run whose processes start without the sandbox says so in its event log, once."""

from __future__ import annotations

import logging

from django.db import DatabaseError, transaction

from .mode import status

log = logging.getLogger(__name__)
EVENT = "sandbox_off"
_noted: set[int] = set()  # runs this process has already checked


def note_unsandboxed(run_id: int | None) -> None:
    if run_id is None or run_id in _noted:
        return
    from runs.executor.state import lock_run
    from runs.models import RunEvent

    try:
        with transaction.atomic():
            run = lock_run(run_id, with_recipe=False)
            if run is not None and not RunEvent.objects.filter(run=run, kind=EVENT).exists():
                run.append_event(EVENT, reason=status().detail)
        _noted.add(run_id)
    except DatabaseError as exc:  # the process runs anyway; the next one tries again
        log.warning("run %s: could not log that it runs unsandboxed: %s", run_id, exc)
