"""What the toy does, through the kernel's transitions only (runs.models).

`start` is its node starter: run on a worker once `start_node` has claimed the node, it
counts (one Iteration per number: created, claimed, finished) until `gate_after`, then
pauses at a gate. `gate_decided` moves it on: accept completes the node, feedback wakes it
for one more iteration (after which it waits at a gate again), reject fails it. `rounds`
iterations end it without a gate.
"""

from __future__ import annotations

from django.db import transaction

from runs.models import Gate, Iteration, NodeRun, Run

from .recipe import read

# The channel the toy's gate says fired: empty approval accepts (Gate.outcome).
FIRED = "gate_after"
# The toy's word for a run paused at its gate (LoopKind.phases), a word runs/ never names.
COUNTED = "counted"
PHASES = {COUNTED: "waiting: counted to its gate, a person decides whether to go on"}


def start(run: Run, row: NodeRun) -> None:
    """The `nodes` hook of node kind `toy`: `row` is claimed (running) by this worker."""
    spec = read(run.recipe_version.source).spec
    attempt = row.attempts  # the claim this worker holds
    woken_by = _iterated_gate(row)
    feedback = woken_by.comment if woken_by else ""
    number = row.iteration_count
    while True:
        number += 1
        it = _begin(run, row, attempt, number, feedback=feedback, after_gate=bool(woken_by))
        if it is None:
            return  # the run ended, or the node is no longer this worker's
        output = f"{number}" + (f" ({feedback})" if feedback else "")
        if not _finish(run, row, attempt, spec, it, output):
            return
        feedback, woken_by = "", None


def gate_decided(run: Run, gate: Gate, row: NodeRun, status: str, actor) -> None:
    """The `gate_decided` hook: in the deciding transaction, the run and the row locked."""
    if status == Gate.Status.REJECTED:
        reason = f"rejected at the gate by {actor.name}"
        row.fail(run, reason + (f": {gate.comment}" if gate.comment else ""))
    elif status == Gate.Status.ACCEPTED:
        it = gate.iteration
        row.complete(run, it.output, iterations=it.number)
    else:  # feedback: one more iteration, on a worker (`start` reads the feedback)
        row.wake(run)


def _iterated_gate(row: NodeRun) -> Gate | None:
    """The gate of this generation whose feedback woke the node, if that is why it runs."""
    gate = (
        Gate.objects.filter(node_run=row, iteration__generation=row.generation)
        .order_by("-id")
        .first()
    )
    return gate if gate is not None and gate.status == Gate.Status.ITERATED else None


def _lock(run: Run) -> Run:
    return Run.objects.select_for_update().select_related("recipe").get(pk=run.pk)


def _begin(run: Run, row: NodeRun, attempt: int, number: int, *, feedback: str, after_gate):
    """Create iteration `number` and start it through the kernel's lifecycle (logging
    `iteration_started`), or None."""
    with transaction.atomic():
        locked = _lock(run)
        row.refresh_from_db()
        if locked.is_terminal or (row.status, row.attempts) != (NodeRun.Status.RUNNING, attempt):
            return None
        # `here`: this worker runs it itself, under the node's lease; nothing is sent.
        it = row.start_iteration(
            locked, number, feedback=feedback, after_gate=after_gate, here=True
        )
        prompt = f"say {number}" + (f", minding: {feedback}" if feedback else "")
        if it is None or not it.start(locked, prompt, leased=False):
            return None
    return it


def _finish(run: Run, row: NodeRun, attempt: int, spec, it: Iteration, output: str) -> bool:
    """Complete the iteration (the kernel logs `iteration_completed`) and settle the node: True when
    it goes on to the next number."""
    with transaction.atomic():
        locked = _lock(run)
        if locked.is_terminal or not it.complete(locked, raw_output=output, output=output):
            return False
        row.refresh_from_db()
        if (row.status, row.attempts) != (NodeRun.Status.RUNNING, attempt):
            return False  # taken back by the sweep meanwhile: the new claim goes on
        if it.number >= spec.rounds:
            row.complete(locked, output, iterations=it.number, attempt=attempt)
            return False
        if it.number >= spec.gate_after:
            row.pause(
                locked,
                kind=Gate.Kind.LOOP,
                message=f"Counted to {it.number}. Accept, or write feedback for one more.",
                iteration=it,
                fired=[FIRED],
            )
            locked.set_phase(COUNTED)  # the toy's own word while a person decides
            return False
        return True
