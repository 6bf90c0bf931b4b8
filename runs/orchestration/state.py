"""What an orchestrating agent reads: runs, and a gate's structured state (for an AI
approver: the iteration, `completionSignaled`, an output excerpt, and what an approve
would do), as plain JSON-ready data."""

from __future__ import annotations

from django.conf import settings
from django.urls import reverse

from runs.engine.completion import excerpt
from runs.models import Gate, NodeRun, Run
from runs.serializers import run_summary

EXCERPT_CHARS = 2000


def run_url(run_id: int) -> str:
    return settings.LOOP_BASE_URL.rstrip("/") + reverse("run_detail", args=[run_id])


def run_row(run: Run) -> dict:
    gate = next(iter(run.waiting_gates), None) if hasattr(run, "waiting_gates") else None
    return {
        "id": run.pk,
        "recipe": run.recipe.slug,
        "status": run.status_word,
        "message": run.message,
        "startedBy": run.started_by.get_username() if run.started_by_id else None,
        "starter": run.starter,  # as every page names who started it (a schedule, too)
        "createdAt": run.created_at.isoformat(),
        "pendingGate": gate.pk if gate else None,
        "url": run_url(run.pk),
    }


def run_state(run: Run) -> dict:
    """A run as `get_run` returns it: what the API's GET /api/runs/{id} says, with the
    pending gate's structured state."""
    data = run_summary(run)
    gate = run.gates.filter(status=Gate.Status.PENDING).select_related("iteration").first()
    data["pending_gate"] = gate_state(gate) if gate else None
    data["url"] = run_url(run.pk)
    return _jsonable(data)


def gate_state(gate: Gate) -> dict:
    """A gate's structured state: enough to decide it without opening the console."""
    iteration = gate.iteration
    row = NodeRun.objects.filter(pk=gate.node_run_id).values_list("max_iterations", flat=True)
    state = {
        "run": gate.run_id,
        "gate": gate.pk,
        "node": gate.node_id,
        "kind": gate.kind,
        "status": gate.status,
        "iteration": gate.iteration_number,
        "maxIterations": row.first(),
        "completionSignaled": gate.completion_signaled,
        "channels": gate.channels or [],
        "statusLine": gate.status_line,
        "outputExcerpt": excerpt(iteration.output, EXCERPT_CHARS) if iteration else "",
        "message": gate.message,
        "decisions": gate.decisions or [],
        "approve": what_approve_does(gate),
        "deadline": gate.deadline_at.isoformat() if gate.deadline_at else None,
        "onTimeout": gate.on_timeout or None,
        "openedAt": gate.created_at.isoformat() if gate.created_at else None,
    }
    if not gate.is_pending:
        state.update(
            decidedBy=gate.decider or None,
            decidedAt=gate.decided_at.isoformat() if gate.decided_at else None,
            surface=gate.surface or None,
            comment=gate.comment,
            decision=gate.decision,
        )
    return state


def what_approve_does(gate: Gate) -> str:
    """The decision rule (Gate.outcome) in words, for the agent deciding."""
    if gate.kind == Gate.Kind.APPROVAL:
        if gate.decisions:
            ids = ", ".join(d["id"] for d in gate.decisions)
            return f"approve with accept: true and one decision ({ids}); feedback is kept as a note"
        return "approve with accept: true completes the step; feedback is kept as a note"
    if gate.empty_approve_completes:
        return (
            "this iteration signalled completion: approve with accept: true to finalize the "
            "node with its output; approve with feedback to discard it and run another "
            "iteration with the feedback"
        )
    return (
        "no completion condition was met: approving runs another iteration (with your "
        "feedback, if you give it); there is nothing to finalize"
    )


def _jsonable(value):
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value
