"""A Python loop's gate on the kernel: its message, its decision, and what a decision does."""

from __future__ import annotations

from django.utils import timezone

from recipes.formats.python import NODE_ID
from runs import dispatch
from runs.models import Gate, NodeRun, Run

from .results import GateDecision, GateRequest, RunCancelled


def gate_message(request: GateRequest) -> str:
    head = (
        f"Iteration {request.iteration} of at most {request.max_iterations} finished; "
        "accept this result, or give feedback for another iteration."
    )
    return f"{head}\n{request.result.text}"


def decision_of(gate: Gate) -> GateDecision:
    who = gate.decider
    if gate.status == Gate.Status.ACCEPTED:
        return GateDecision(GateDecision.ACCEPT, gate.comment, who)
    if gate.status == Gate.Status.ITERATED:
        return GateDecision(GateDecision.ITERATE, gate.comment, who)
    if gate.status == Gate.Status.REJECTED:
        return GateDecision(GateDecision.REJECT, gate.comment, who)
    raise RunCancelled("the gate was cancelled")


def gate_decided(run: Run, gate: Gate, row: NodeRun) -> None:
    """A person decided at a Python run's gate (inside the decision's transaction): the
    agent row goes back to running and a suspended `workflow` node back to work, where its
    execution replays to this gate and reads the decision. A waiting script reads it too."""
    row.status = NodeRun.Status.RUNNING
    row.save(update_fields=["status"])
    workflow = NodeRun.objects.filter(
        run=run, node_id=NODE_ID, iteration=0, status=NodeRun.Status.PAUSED
    ).first()
    if workflow is not None:
        workflow.status = NodeRun.Status.PENDING
        workflow.queued_at = timezone.now()
        workflow.lease_expires_at = None
        workflow.save(update_fields=["status", "queued_at", "lease_expires_at"])
        run.append_event("node_queued", NODE_ID, kind="python")
        dispatch.send_on_commit("start_node", workflow.pk)
