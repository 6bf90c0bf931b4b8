"""Hand claimed work to its kind: `start_node` claims a node and calls its kind's runner
(LoopKind.nodes), `run_iteration` reads a pending iteration and calls its kind's
(LoopKind.iterations). The kernel claims, logs and fails; what a node or an iteration does
is its kind's."""

from __future__ import annotations

from django.db import transaction
from django.db.models import OuterRef, Subquery

from runs import kinds
from runs.models import Iteration, NodeRun

from .spec import SpecError, node_spec, spec_for
from .state import lock_run
from .stream import OutputStream


def start_node(node_run_id: int) -> None:
    if not NodeRun.objects.claim(node_run_id):
        return  # a duplicate delivery, or the node was cancelled
    row = NodeRun.objects.select_related("run__recipe_version", "run__recipe").get(pk=node_run_id)
    run = row.run
    try:
        spec = spec_for(run)
        node = node_spec(spec, row.node_id)
    except (SpecError, KeyError) as exc:
        fail_node(row, f"cannot load node: {exc}")
        return
    try:
        starts = kinds.for_node(node.kind).nodes[node.kind]
    except LookupError as exc:
        fail_node(row, f"cannot start node: {exc}")
        return
    with transaction.atomic():
        locked = lock_run(run.pk)
        if locked.is_terminal:
            return
        locked.append_event(
            "node_started", row.node_id, kind=row.kind, iteration=row.iteration or None
        )
    starts(run, row)  # its kind's runner (a workflow's is loops.workflow.steps.start)


def fail_node(row: NodeRun, error: str, stream: OutputStream | None = None) -> None:
    """Fail a claimed node with `error`, keeping everything it printed (`stream`)."""
    with transaction.atomic():
        run = lock_run(row.run_id)
        row.refresh_from_db()
        printed = {}
        if stream is not None:  # everything the step printed, not only what was flushed
            printed = {"output": stream.text, "stderr": stream.stderr, **stream.fields()}
        if not run.is_terminal:
            row.fail(run, error, attempt=row.attempts, columns=printed)


def run_iteration(iteration_id: int) -> None:
    it = pending_iteration(iteration_id)
    if it is None:
        return  # duplicate delivery or cancelled
    row_kind = it.node_run.kind
    kinds.for_node(row_kind).iterations[row_kind](it)  # a workflow's is loop.run_loop_iteration


def pending_iteration(iteration_id: int) -> Iteration | None:
    """One read: the iteration, its node, its run and recipe version, and the previous
    iteration's output ($LOOP_PREV_OUTPUT, as `previous_output`), whatever the run's
    history."""
    return (
        Iteration.objects.select_related("node_run", "run__recipe_version", "run__recipe")
        .annotate(previous_output=_previous_output())
        .filter(pk=iteration_id, status=Iteration.Status.PENDING)
        .first()
    )


def _previous_output():
    """$LOOP_PREV_OUTPUT as a subquery: the previous iteration's cleaned output (empty on
    the first iteration and on the first one after a gate, which the caller decides)."""
    previous = Iteration.objects.filter(
        node_run=OuterRef("node_run"),
        generation=OuterRef("generation"),
        number=OuterRef("number") - 1,
    ).order_by()
    return Subquery(previous.values("output")[:1])
