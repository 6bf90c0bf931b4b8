"""A Python loop's gate on the kernel: its message, its decision, and what a decision does."""

from __future__ import annotations

from loops.python.format import NODE_ID
from runs.models import Gate, NodeRun, Run

from .results import GateDecision, GateRequest, RunCancelled


def gate_message(request: GateRequest) -> str:
    """What the gate asks; a stop rule's gate says first which rule fired and the trend."""
    head = (
        f"Iteration {request.iteration} of at most {request.max_iterations} finished; "
        "accept this result, or give feedback for another iteration."
    )
    if request.firing is not None:
        head = f"{request.firing.words}\n{head}"
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


def gate_decided(run: Run, gate: Gate, row: NodeRun, status: str, actor) -> None:
    """A person decided at a Python run's gate (inside the decision's transaction): the
    agent row goes back to running and a suspended `workflow` node back to work, where its
    execution replays to this gate and reads the decision (`decision_of`: a reject too,
    which the recipe's code may catch). A waiting script reads it too."""
    row.unpause(run)
    workflow = NodeRun.objects.filter(
        run=run, node_id=NODE_ID, iteration=0, status=NodeRun.Status.PAUSED
    ).first()
    if workflow is not None:
        workflow.wake(run)
