"""Handoffs: the one way a role's report reaches a step-machine run.

`record_handoff` is called by every way in — `manage.py loop handoff`, `POST
/api/runs/{id}/handoffs`, and the agent's `record_handoff` tool (`$LOOP_HANDOFF_CMD`, the
MCP server, an HTTP provider's function tool) — so what is accepted is decided here once.
A `handoff.wait` step then takes the latest handoff of its role recorded after the run's
last consumed one (`take`); nothing on disk ever counts.

An agent's handoff belongs to its turn (`iteration`) and to the attempt that recorded it
(logged with it): a turn that ended records no more, and a wait takes only a handoff from
the role's latest turn (or one a person recorded, which has no turn). So a turn re-run
after its worker was lost replaces its earlier handoff if that was not taken yet (the
latest wins), and one a later wait would otherwise mistake for the next turn's report is
never taken (recipes.md, "A re-run turn").
"""

from __future__ import annotations

import json

from django.db import transaction
from django.db.models import Q

from loops.stepmachine.spec import HANDOFF_SCHEMA, HANDOFF_STATUSES, SESSION_KIND, TICK_TASK
from runs import dispatch
from runs.actor import Actor
from runs.agent_tools import AgentTool, ToolContext, ToolError
from runs.engine.stop_rules import score_in
from runs.errors import Conflict, InputError, NotFound
from runs.executor.spec import SpecError, spec_for
from runs.executor.state import lock_run, on_fresh_connection
from runs.models import Iteration, NodeRun, Run

from .machine import MachineState, machine_row, waits_for_a_person
from .models import Handoff

SUMMARY_LIMIT = 100_000
DATA_LIMIT = 1_000_000


def record_handoff(
    run_id: int,
    *,
    role: str,
    status: str,
    actor: Actor,
    summary: str = "",
    data=None,
    schema: str = HANDOFF_SCHEMA,
    iteration_id: int | None = None,
) -> Handoff:
    """Record a role's handoff on a live step-machine run and wake its runner."""
    summary = (summary or "").replace("\x00", "")
    errors = _form_errors(schema, status, summary, data)
    with transaction.atomic():
        run, row, roles = _live_machine(run_id)
        if role not in roles:
            known = ", ".join(roles) or "none"
            errors["role"] = f"{str(role)[:60]!r} is not a role of this recipe (roles: {known})"
        if errors:
            raise InputError(errors)
        turn = _turn(iteration_id, role) if iteration_id is not None else None
        content = {"schema": schema, "role": role, "status": status, "summary": summary}
        if data is not None:
            content["data"] = data
        handoff = _store(run, actor, turn, content, iteration_id)
        state = MachineState.of(row)
        state.progressed()
        state.save(row)
        dispatch.send_on_commit(TICK_TASK, run.pk)
    return handoff


def _form_errors(schema: str, status: str, summary: str, data) -> dict[str, str]:
    """What is wrong with the handoff's document itself, by field."""
    errors = {}
    if schema != HANDOFF_SCHEMA:
        errors["schema"] = f"must be {HANDOFF_SCHEMA}, not {str(schema)[:60]!r}"
    if status not in HANDOFF_STATUSES:
        errors["status"] = f"must be one of {', '.join(HANDOFF_STATUSES)}, not {str(status)[:60]!r}"
    if len(summary) > SUMMARY_LIMIT:
        errors["summary"] = f"is limited to {SUMMARY_LIMIT:,} characters"
    if data is not None and not isinstance(data, dict):
        errors["data"] = "must be a JSON object"
    elif data is not None and len(json.dumps(data, default=str)) > DATA_LIMIT:
        errors["data"] = f"is limited to {DATA_LIMIT:,} characters of JSON"
    return errors


def _live_machine(run_id: int) -> tuple[Run, NodeRun, list[str]]:
    """The run, locked, its machine's row, locked, and its roles: a step-machine run
    still at work, not waiting for a person, or Conflict."""
    run = lock_run(run_id)
    if run is None:
        raise NotFound(f"No run {run_id}.")
    if run.recipe.kind != "planeai":
        raise Conflict(f"Run {run.pk} is not a step-machine run; it takes no handoffs.")
    try:
        roles = sorted(spec_for(run).roles)
    except SpecError as exc:
        raise Conflict(f"Run {run.pk}'s recipe does not load: {exc}") from None
    row = machine_row(run, lock=True)
    if run.is_terminal or waits_for_a_person(run) or row is None or row.is_terminal:
        raise Conflict(f"Run {run.pk} is {run.status_word}: it takes no more handoffs.")
    return run, row, roles


def _store(
    run: Run, actor: Actor, turn: Iteration | None, content: dict, iteration_id: int | None
) -> Handoff:
    """The handoff `content`, logged (`handoff_recorded`) and kept at its event's seq."""
    role, status, summary = content["role"], content["status"], content["summary"]
    name = actor.name if actor.surface != "agent" else f"the {role} agent"
    event = run.append_event(
        "handoff_recorded",
        role,
        status=status,
        summary=summary[:500],
        by=name,
        surface=actor.surface,
        **({"turn": turn.number, "attempt": turn.attempts} if turn else {}),
    )
    given = score_in(content.get("data"))
    if turn is not None and given is not None:  # the role's own score of its turn
        type(turn).objects.filter(pk=turn.pk).update(
            score=given, score_detail={"source": "handoff"}
        )
    return Handoff.objects.create(
        run=run,
        role=role,
        status=status,
        summary=summary,
        data=content.get("data"),
        content=content,
        seq=event.seq,
        iteration_id=iteration_id,
        recorded_by=actor.person,
        recorded_by_name=name,
        surface=actor.surface,
    )


def _turn(iteration_id: int, role: str) -> Iteration:
    """The turn recording a handoff: it must be this role's, and still at work (an attempt
    the sweep took back, or a turn that ended, reports nothing more)."""
    turn = Iteration.objects.filter(pk=iteration_id, node_id=role).first()
    if turn is None or turn.status != Iteration.Status.RUNNING:
        raise Conflict("This turn has ended: its handoff would not be taken.")
    return turn


def latest_turn(run: Run, role: str) -> Iteration | None:
    """The last turn the machine sent to `role` (any of its sessions)."""
    return (
        Iteration.objects.filter(run=run, node_id=role, node_run__kind=SESSION_KIND)
        .order_by("-id")
        .first()
    )


def take(run: Run, row: NodeRun, state: MachineState, role: str, step_id: str) -> Handoff | None:
    """The handoff a `handoff.wait` on `role` consumes now, if any (the caller holds the
    run's lock): the latest of that role recorded after the last consumed handoff by the
    role's latest turn (or by a person, for the role), whose document is a valid
    planeai.handoff.v1. Older ones stay unconsumed: stale."""
    turn = latest_turn(run, role)
    candidates = Handoff.objects.filter(run=run, role=role, seq__gt=state.consumed_seq).filter(
        Q(iteration__isnull=True) | Q(iteration=turn)
    )
    candidates = candidates.order_by("-seq")
    chosen = next((h for h in candidates if h.accepted_form), None)
    if chosen is None:
        return None
    from django.utils import timezone

    now = timezone.now()
    Handoff.objects.filter(pk=chosen.pk).update(consumed_at=now, consumed_by_step=step_id)
    chosen.consumed_at, chosen.consumed_by_step = now, step_id
    state.consumed_seq = chosen.seq
    state.consumed_at = now.isoformat()
    return chosen


# --- the agent's tool ---------------------------------------------------------------------


def _record_from_agent(ctx: ToolContext, args: dict):
    role = args.get("role") or ctx.role
    if role != ctx.role:
        raise ToolError(f"you are the {ctx.role} agent: record handoffs for your own role")
    try:
        # A dropped database session costs a retry on a new one, not the turn's report.
        handoff = on_fresh_connection(
            record_handoff,
            ctx.run_id,
            role=role,
            status=args.get("status", ""),
            summary=args.get("summary", ""),
            data=args.get("data"),
            actor=Actor("agent"),
            iteration_id=ctx.iteration_id,
        )
    except InputError as exc:
        raise ToolError("; ".join(f"{k}: {v}" for k, v in exc.errors.items())) from None
    except (Conflict, NotFound) as exc:
        raise ToolError(str(exc)) from None
    return {
        "recorded": handoff.pk,
        "role": handoff.role,
        "status": handoff.status,
        "message": "Handoff recorded; the loop continues from it.",
    }


RECORD_HANDOFF = AgentTool(
    name="record_handoff",
    description=(
        "Record your structured handoff for this loop: the only way the loop learns your "
        "outcome. status: completed (done), blocked (cannot go on), needs_human (a person "
        "must decide), failed. summary: what you did or found, for the next step's prompt."
    ),
    parameters={
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": list(HANDOFF_STATUSES)},
            "summary": {"type": "string", "maxLength": SUMMARY_LIMIT},
            "data": {"type": "object", "description": "Structured details (findings, ...)"},
            "role": {"type": "string", "description": "Your role (the default)"},
        },
        "required": ["status"],
        "additionalProperties": False,
    },
    handler=_record_from_agent,
)
