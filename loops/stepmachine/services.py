"""The step machine's services: what its own surfaces call (`loop tick` here; a handoff,
from `loop handoff`, the API or the agent's tool, is `handoffs.record_handoff`). Like
`runs.services` they validate, move state through the models inside a transaction and
send work on commit."""

from __future__ import annotations

from django.db import transaction

from runs import dispatch
from runs.actor import Actor
from runs.errors import Conflict
from runs.executor.state import lock_run
from runs.models import NodeRun, Run

from . import runner
from .machine import machine_row, start_asked, waits_for_a_person
from .spec import TICK_TASK


def tick(run: Run, actor: Actor, *, inline: bool = False) -> runner.TickReport | None:
    """Advance a step machine (`loop tick`): start it if it was only created, else run its
    current step and what follows, at most ten ticks. `inline` runs the ticks in this
    process (the command line, which waits to print what happened); otherwise they are
    sent to a worker. None when they were sent, or the machine was started."""
    with transaction.atomic():
        run = lock_run(run.pk)
        if run.recipe.kind != "planeai":
            raise Conflict(f"Run {run.pk} is not a step-machine run.")
        if run.is_terminal or waits_for_a_person(run):
            raise Conflict(f"Run {run.pk} is {run.status_word}: there is nothing to tick.")
        row = machine_row(run, lock=True)
        if row is not None and row.status == NodeRun.Status.PAUSED:
            raise Conflict(f"Run {run.pk} waits for a decision at a gate: decide there.")
        run.append_event("tick_requested", by=actor.name, surface=actor.surface)
        if row is None or (row.status == NodeRun.Status.PENDING and row.queued_at is None):
            if row is not None:
                start_asked(row)  # the sweep starts it, should this message be lost
            dispatch.send_on_commit("advance_run", run.pk)
            return None
        if not inline:
            dispatch.send_on_commit(TICK_TASK, run.pk)
            return None
    return runner.tick(run.pk, trigger="cli")
