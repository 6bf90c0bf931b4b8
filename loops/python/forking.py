"""Forking a Python loop on the kernel: the new run holds copies of the agent calls (and
the gate decisions) that came before the fork point, and its `workflow` node replays them
like any re-execution; at the fork point the loop reads the fork's feedback as if a person
had given it at a gate (`RecordingHost.forked_feedback`), and a changed prompt replaces the
forked agent's instructions from the next iteration on (`RecordingHost.forked_prompt`)."""

from __future__ import annotations

from runs import dispatch
from runs.errors import Conflict
from runs.models import Gate, Iteration, NodeRun


def check(point) -> None:
    """Any completed agent call inside a LoopWorkflow can be a fork point; a single call of
    a pipeline has no next iteration to go on with."""
    if not point.row.max_iterations:
        raise Conflict(
            f"'{point.row.node_id}' is not inside a loop: only a loop's iterations can be "
            "forked from."
        )


def carry(new, point, counts: dict) -> None:
    from runs.fork import clone, copy_iterations, copy_nodes

    old, cutoff = point.old, point.it.finished_at
    latest: dict[str, NodeRun] = {}
    for row in NodeRun.objects.filter(run=old, kind="agent", iteration=0).order_by("generation"):
        latest[row.node_id] = row
    wanted = [row for row in latest.values()]
    calls = list(
        Iteration.objects.filter(
            node_run__in=wanted,
            status=Iteration.Status.COMPLETED,
            finished_at__lte=cutoff,
        )
        .filter(generation__in={row.generation for row in wanted})
        .order_by("id")
    )
    calls = [it for it in calls if it.generation == latest[it.node_id].generation]
    used = {it.node_run_id for it in calls}
    rows = [row for row in wanted if row.pk in used]
    node_map = copy_nodes(
        new, rows, status=NodeRun.Status.RUNNING, finished_at=None, error="", attempts=0
    )
    copies = copy_iterations(new, calls, node_map)
    # The decisions the replay reads on its way to the fork point (not the one at it: the
    # fork replaces that decision).
    decided = Gate.objects.filter(
        iteration__in=[it.pk for it in calls if it.pk != point.it.pk],
        status__in=[Gate.Status.ACCEPTED, Gate.Status.ITERATED, Gate.Status.REJECTED],
    )
    Gate.objects.bulk_create(
        [
            clone(
                gate,
                run_id=new.pk,
                node_run_id=node_map[gate.node_run_id].pk,
                iteration_id=copies[gate.iteration_id].pk,
                carried_from_id=gate.pk,
            )
            for gate in decided
        ]
    )
    counts["iterations"] = len(copies)
    dispatch.send_on_commit("advance_run", new.pk)  # the `workflow` node starts and replays
