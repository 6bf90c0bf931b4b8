"""Deciding at gates: approve, reject, the rules a decision must pass, and what a decision
does to its node. Part of the services (runs/services.py re-exports every name): pages,
the API, the CLI and the MCP server decide through these and nothing else."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Exists, OuterRef

from runs import budget, kinds, review
from runs.actor import Actor
from runs.engine.variables import DECIDED
from runs.errors import (
    AlreadyDecided,
    Conflict,
    NotAllowed,
    NotFound,
    ServiceError,
    StarterCannotApprove,
    UnknownDecision,
)
from runs.executor.spec import SpecError, node_spec, spec_for
from runs.executor.state import lock_run, max_iterations_error
from runs.models import Gate, NodeRun, Run, RunEvent
from runs.models.gate import REJECT_NEEDS_A_REASON, THEN_STATUS


def pending_gate(run: Run) -> Gate | None:
    """The gate the run waits at, if any (the oldest, when parallel branches wait at several)."""
    return run.gates.filter(status=Gate.Status.PENDING).select_related("iteration").first()


def gate_for_decision(run: Run, gate_id: int | None = None) -> Gate:
    """The gate a console form, an API call or the CLI decides (see GateQuerySet)."""
    return Gate.objects.for_decision(run, gate_id)


def approve(
    gate_id: int, actor: Actor, *, comment="", decision="", record_only=False, digest=""
) -> Gate:
    """Approve: what that means (accept, or iterate with the comment) is Gate.outcome.
    `record_only`: record the decision and leave the run paused; `resume_run` acts on it."""
    return decide(
        gate_id,
        actor,
        "approve",
        comment=comment,
        decision=decision,
        record_only=record_only,
        digest=digest,
    )


def reject(gate_id: int, actor: Actor, *, reason: str, digest: str = "") -> Gate:
    return decide(gate_id, actor, "reject", comment=reason, digest=digest)


def decide(
    gate_id: int,
    actor: Actor,
    action: str,
    *,
    comment="",
    decision="",
    record_only=False,
    digest="",
) -> Gate:
    """The older verbs (approve with an optional declared `decision`, reject): load the
    gate under the run's lock, let it record the decision, then move its node (unless
    `record_only`: the node stays paused until `resume_run` applies the decision)."""
    with transaction.atomic():
        run, gate = _locked(gate_id)
        if gate.is_pending:
            gate._check_decision(action, decision)
            if decision:
                _check_text(offered(gate, decision), comment)
        status = gate.outcome(action, (comment or "").strip())
        return _decided(run, gate, actor, action, comment, decision, status, digest, record_only)


def respond(gate_id: int, actor: Actor, decision: str, *, text: str = "", digest: str = ""):
    """The one verb: answer the gate with one of its `offered_decisions` by id (with a text
    where it asks for one), made on `digest` when given (runs.review: refused when the gate
    shows other content now). An approval that leaves a quorum short keeps the gate open."""
    with transaction.atomic():
        run, gate = _locked(gate_id)
        if not gate.is_pending:
            raise AlreadyDecided(gate)
        choice = offered(gate, decision)
        text = (text or "").strip()
        _check_text(choice, text)
        status = THEN_STATUS[choice["then"]]
        action = "reject" if status == Gate.Status.REJECTED else "approve"
        stored = choice["id"] if gate.decisions else ""
        return _decided(run, gate, actor, action, text, stored, status, digest, False)


def offered(gate: Gate, decision: str) -> dict:
    """The offered decision `decision` names; UnknownDecision listing them otherwise."""
    choices = gate.offered_decisions
    for choice in choices:
        if choice["id"] == decision:
            return choice
    ids = ", ".join(choice["id"] for choice in choices)
    raise UnknownDecision(f"Gate {gate.pk} offers no decision '{decision}'; choose one of: {ids}.")


def _check_text(choice: dict, text: str) -> None:
    """A decision that asks for words is refused without them, whichever verb names it."""
    if choice["text_required"] and not (text or "").strip():
        raise ServiceError(
            REJECT_NEEDS_A_REASON
            if choice["id"] == "reject"
            else f"“{choice['label']}” needs a text: say what and why."
        )


def _locked(gate_id: int) -> tuple[Run, Gate]:
    run_id = Gate.objects.filter(pk=gate_id).values_list("run_id", flat=True).first()
    if run_id is None:
        raise NotFound(f"No gate {gate_id}.")
    run = lock_run(run_id)
    return run, Gate.objects.select_related("iteration", "decided_by").get(pk=gate_id)


def _decided(run, gate, actor, action, comment, decision, status, digest, record_only) -> Gate:
    """Every check a decision passes, in one order for both verbs, then the decision."""
    actor.check("runs.operate_run", run)
    kind = kinds.of_run(run)
    if record_only and not kind.decides_later:
        raise Conflict("Only a workflow recipe's gates can be decided now and resumed later.")
    if gate.is_pending and digest:
        review.check(run, gate, digest)
    # The deadline's own decision is never an approval (runs.engine.deadlines refuses one
    # that approves): neither four eyes nor a quorum counts it.
    by_deadline = actor.surface == "sweep"
    if not by_deadline:
        check_approver(run, gate, actor, status)
    budget.check_gate_decision(gate, action, comment, decision)
    kind.check_decision(run, gate, status)
    if gate.is_pending and not by_deadline:
        if _short_of_quorum(run, gate, actor, status, decision, comment, digest):
            return gate
    status = gate.decide(run, actor, action, comment, decision, status=status, digest=digest)
    if record_only:
        run.append_event(
            "decision_recorded", gate.node_id, gate=gate.pk, outcome=status, by=actor.name
        )
        return gate
    row = NodeRun.objects.select_for_update().get(pk=gate.node_run_id)
    _apply(run, gate, row, status, actor)
    run.update_status()
    return gate


def _short_of_quorum(run, gate, actor, status, decision, comment, digest) -> bool:
    """An approval at a gate that needs several: counted (one per person) and, while the
    count is short, recorded without deciding. Feedback or a reject by anyone decides."""
    needed = gate.approvals_needed
    if status != Gate.Status.ACCEPTED or needed <= 1:
        return False
    if actor.person is None:
        raise NotAllowed(
            f"This gate needs {needed} approvals from different people: approve as a named "
            "account (--user NAME)."
        )
    earlier = gate.responses.filter(closed_gate=False)
    given = gate.approvals_given()
    if earlier.filter(by=actor.person).exists():
        raise Conflict(
            f"You have already approved this gate; it needs {needed} approvals from "
            f"different people ({given} so far)."
        )
    if given + 1 >= needed:
        return False
    answered = decision or gate.offered_decisions[0]["id"]
    gate.respond_as(run, actor, answered, comment, digest, closed=False)
    run.append_event(
        "gate_approval_counted",
        gate.node_id,
        gate=gate.pk,
        by=actor.name,
        surface=actor.surface,
        decision=answered,
        approvals=given + 1,
        needed=needed,
        iteration=gate.iteration_number,
    )
    return True


def recorded_decisions(run: Run) -> list[Gate]:
    """Gates decided with `record_only` (their `decision_recorded` event says so) whose node
    still waits: what `resume_run` applies."""
    if not kinds.of_run(run).decides_later:
        return []
    recorded = set(
        RunEvent.objects.filter(run=run, kind="decision_recorded").values_list(
            "data__gate", flat=True
        )
    )
    waiting = Gate.objects.filter(pk__in=recorded, node_run__status=NodeRun.Status.PAUSED)
    # ... and still the node's last gate (a node that went on may pause again at a new one)
    later = Gate.objects.filter(node_run_id=OuterRef("node_run_id"), pk__gt=OuterRef("pk"))
    return list(waiting.exclude(Exists(later)).select_related("iteration", "decided_by"))


RECORDED_OUTCOMES = {
    Gate.Status.ACCEPTED: "Accepted",
    Gate.Status.ITERATED: "Sent back for another iteration",
    Gate.Status.REJECTED: "Rejected",
}


def recorded_words(gate: Gate) -> str:
    """A decision recorded for later (`recorded_decisions`), as the run page and `run
    status` say it; each adds how to carry it out there."""
    if gate.decision:
        what = f"Decided “{gate.decision_label}”"
    else:
        what = RECORDED_OUTCOMES.get(gate.status, gate.status)
    return f"{what} at {gate.node_id} by {gate.decider or 'someone'}, recorded"


OTHERS_APPROVE = (
    "This recipe asks for someone other than the person who started the run to approve its"
    " gates (approvers: others). Ask another operator to approve; you can still give"
    " feedback or reject."
)


def check_approver(run: Run, gate: Gate, actor: Actor, status: str) -> None:
    """A recipe with `approvers: others`: the starter may not accept at its gates (feedback
    that asks for another iteration, and rejecting, stay open to everyone)."""
    if status != Gate.Status.ACCEPTED or getattr(_run_spec(run), "approvers", "anyone") != "others":
        return
    if gate.status != Gate.Status.PENDING:
        return  # a decided gate answers AlreadyDecided as usual
    person = actor.person
    if person is None:
        raise StarterCannotApprove(
            "This recipe asks for someone other than the person who started the run to approve"
            " its gates (approvers: others): approve as a named account (--user NAME)."
        )
    if run.started_by_id is not None and run.started_by_id == person.pk:
        raise StarterCannotApprove(OTHERS_APPROVE)


LAST_ITERATION = (
    "Iteration {n} is this loop's last (max_iterations: {n}) and it met its completion "
    "condition, so feedback cannot run another iteration. Approve without feedback to accept "
    "its output, or reject it."
)


def check_room_to_iterate(run: Run, gate: Gate, status: str) -> None:
    """Feedback at a loop gate asks for another iteration (Gate.outcome); at the loop's last
    iteration there is none to run. Refused, with the gate left open, rather than failing
    the node as if no completion condition had been met. For a kind whose loops are the
    kernel's `loop` and `loop_group` nodes (LoopKind.check_decision)."""
    if gate.kind != Gate.Kind.LOOP:
        return
    if gate.status != Gate.Status.PENDING or status != Gate.Status.ITERATED:
        return
    row = NodeRun.objects.get(pk=gate.node_run_id)
    node = node_spec(_run_spec(run), row.node_id)
    limit = (node.loop or node.loop_group).max_iterations
    if gate.completion_signaled and row.iteration_count >= limit:
        raise Conflict(LAST_ITERATION.format(n=limit))


def _run_spec(run: Run):
    """The run's spec for a decision. It loads from the run's snapshot; a run started
    before snapshots were kept reads its command files from the disk and may not load:
    that is a refusal with the reason (cancel still works), never a server error."""
    try:
        return spec_for(run)
    except SpecError as exc:
        raise Conflict(
            f"Run {run.pk}'s recipe no longer loads ({exc}); cancel the run or restore the file."
        ) from None


def _apply(run: Run, gate: Gate, row: NodeRun, status: str, actor: Actor) -> None:
    """Move the gate's node on: what a decision means is the run's kind's to say, but at a
    soft budget's gate, which the kernel opened (runs.budget)."""
    if gate.kind == Gate.Kind.BUDGET:
        budget.gate_decided(run, gate, row, status, actor)
        return
    kinds.of_run(run).gate_decided(run, gate, row, status, actor)


def apply_kernel_decision(run: Run, gate: Gate, row: NodeRun, status: str, actor: Actor):
    """The kernel's meaning of a decision (runs.kinds.LoopKind.gate_decided). Each transition
    sends what comes next (the node's own next iteration, or one advance_run when the node
    ends) and nothing else does."""
    if status == Gate.Status.REJECTED:
        fail_rejected(run, gate, row, actor)
        return
    if gate.kind == Gate.Kind.APPROVAL:
        capture = node_spec(_run_spec(run), row.node_id).approval.capture_response
        output = gate.decision or (gate.comment if capture else "") or "approved"
        row.complete(run, output, columns=decided_state(row, gate), decided_by=actor.name)
    elif status == Gate.Status.ACCEPTED:
        it = gate.iteration
        row.complete(
            run,
            it.output,
            it.structured,
            columns=decided_state(row, gate),
            iterations=it.number,
            channels=gate.channels,
        )
    else:
        node = node_spec(_run_spec(run), row.node_id)
        loop = node.loop or node.loop_group
        number = row.iteration_count + 1
        if row.iteration_count >= loop.max_iterations:
            row.fail(run, max_iterations_error(row.node_id, loop))
        else:
            kinds.of_run(run).begin_iteration(
                run, row, number, feedback=gate.comment, after_gate=True
            )


def decided_state(row: NodeRun, gate: Gate) -> dict:
    """The node's state with its gate's structured result, which `$node.output.decision`
    (and `.text`, `.by`, `.via`) reads (runs.engine.variables.resolve_field)."""
    return {"state": {**(row.state or {}), DECIDED: gate.result}}


def fail_rejected(run: Run, gate: Gate, row: NodeRun, actor: Actor) -> None:
    """A reject fails the gate's node, saying who rejected and why: the one reject path
    (a kind whose gate_decided keeps the kernel's meaning of a reject calls it too). The
    gate is named when it is not the node (a step machine's step)."""
    where = "the gate" if gate.node_id == row.node_id else gate.node_id
    reason = f"rejected at {where} by {actor.name}"
    row.fail(run, reason + (f": {gate.comment}" if gate.comment else ""))
