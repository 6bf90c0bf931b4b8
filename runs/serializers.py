"""Plain-data views of runs, shared by the API and the command line."""

from runs import telemetry
from runs.models import Gate, Iteration, NodeRun, Run
from runs.output_reads import api_output, api_stderr, bounded


def run_summary(run: Run) -> dict:
    """The run and its top-level nodes, whose outputs together are bounded
    (runs/output_reads.py: the ends of the longest are cut, `output_truncated` says so)."""
    nodes = [
        {
            "node": n.node_id,
            "kind": n.kind,
            "status": n.status,
            "iteration": n.iteration or None,
            "iterations": n.iteration_count,
            "max_iterations": n.max_iterations,
            **api_output(n),
            **api_stderr(n),
            "error": n.error,
            # A workflow node's child runs, in item order (the latest of each item).
            "child_runs": _children(n) if n.kind == NodeRun.Kind.WORKFLOW else [],
        }
        for n in bounded(run.nodes.filter(iteration=0).order_by("id"), "output", "stderr")
    ]
    gate = (
        run.gates.filter(status=Gate.Status.PENDING)
        .select_related("iteration", "decided_by")
        .first()
    )
    return {
        "id": run.pk,
        "recipe": run.recipe.slug,
        "version": run.recipe_version.number,
        "status": run.status_word,  # its kind's phase when it has one
        "phase": run.phase,
        "message": run.message,
        "inputs": run.inputs,
        "error": run.error,
        "started_by": run.started_by.get_username() if run.started_by_id else None,
        "starter": run.starter,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "parent": {"run": run.parent_id, "node": run.parent_node.node_id, "item": run.child_index}
        if run.parent_node_id
        else None,
        "nodes": nodes,
        "pending_gate": gate.as_dict() if gate else None,
        "waiting_for_provider": provider_waits(run),
        "trace_id": telemetry.trace_of(run),
    }


def provider_waits(run: Run) -> list[dict]:
    """The run's iterations waiting for their provider (runs/executor/provider_queue.py)."""
    waiting = Iteration.objects.filter(run=run).waiting_for_a_provider()[:20]
    return [
        {
            "iteration": it.pk,
            "node": it.node_id,
            "number": it.number,
            "provider": it.waiting_for,
            "ahead": it.waiting_ahead or 0,
            "since": it.waiting_since,
            "words": it.waiting_words,
        }
        for it in waiting
    ]


def _children(row) -> list[int]:
    latest: dict[int, int] = {}
    for pk, index in (
        Run.objects.filter(parent_node=row)
        .order_by("child_index", "id")
        .values_list("pk", "child_index")
    ):
        latest[index or 0] = pk
    return [latest[i] for i in sorted(latest)]
