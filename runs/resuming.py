"""What resuming a failed or cancelled run would do, read before a person presses Resume.

`services.resume_run` runs again, from their start, the nodes `resumed_nodes` names: a loop
starts over at iteration 1, so iterations that had finished are run (and, with a paid agent,
paid for) again. The run page says so on its Resume confirmation (`resume_restarts`) and
offers to continue instead from the last finished iteration (`continue_point`): a fork,
which carries iterations 1..k over without running them and goes on with k+1 (runs.fork).
"""

from __future__ import annotations

from django.db.models import Count, F

from runs import kinds
from runs.errors import ServiceError
from runs.executor.spec import node_spec, spec_for
from runs.models import Iteration, NodeRun, Run

STOPPED = (Run.Status.FAILED, Run.Status.CANCELLED)
FINISHED = (Iteration.Status.COMPLETED, Iteration.Status.TIMED_OUT)


def resumable(run: Run) -> bool:
    """Whether a failed or cancelled run of this kind may be resumed (not when its kind
    says why not, `LoopKind.resume_refused`: it is re-run instead)."""
    return not kinds.of_run(run).resume_refused


def resumed_nodes(run: Run) -> list[NodeRun]:
    """The top-level nodes a resume runs again from their start: every one that did not
    complete, and `always_run` ones."""
    spec = spec_for(run)
    return [
        row
        for row in NodeRun.objects.filter(run=run, iteration=0)
        if row.status != NodeRun.Status.COMPLETED
        or getattr(node_spec(spec, row.node_id), "always_run", False)
    ]


def resume_restarts(run: Run) -> list[dict]:
    """Each node a resume would start over that had finished iterations, with how many:
    [{"node_id", "finished"}]. Empty when the run cannot be resumed."""
    if run.status not in STOPPED or not resumable(run):
        return []
    rows = {row.pk: row for row in resumed_nodes(run)}
    counts = (
        Iteration.objects.filter(
            node_run__in=list(rows), generation=F("node_run__generation"), status__in=FINISHED
        )
        .values("node_run")
        .annotate(finished=Count("pk"))
        .order_by("node_run")
    )
    return [
        {"node_id": rows[entry["node_run"]].node_id, "finished": entry["finished"]}
        for entry in counts
    ]


def continue_point(run: Run) -> Iteration | None:
    """The latest finished iteration of a node the run stopped in that a fork can go on
    from, or None: where "Continue from …" starts a new run without paying again."""
    from runs.fork import check_fork_point, forkable

    if run.status not in STOPPED:
        return None
    latest = (
        Iteration.objects.filter(
            run=run,
            status__in=FINISHED,
            generation=F("node_run__generation"),
            node_run__status__in=[NodeRun.Status.FAILED, NodeRun.Status.CANCELLED],
        )
        .select_related("node_run")
        .order_by("-finished_at", "-id")[:10]
    )
    for it in latest:
        if not forkable(it.node_run):
            continue
        try:
            check_fork_point(run, it.node_id, it.number)
        except ServiceError:
            continue
        return it
    return None
