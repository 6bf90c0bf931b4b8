"""Forking a step machine at a session turn (runs.fork calls `check`, then `carry`).

Forking at turn k of role R: the new run holds copies of the sessions that were open when
turn k was sent, with their turns that had finished when turn k finished (carried, never
sent again), and its machine stands where the original's stood when it sent turn k — the
step, the round, the tick count, the phase and `runtime.last_error`, as logged with that
turn (`turn_sent`, sessions.send_turn). From there the step's prompt (or the fork's edited
prompt), with the fork's feedback appended, goes to R's session as turn k+1, and the
machine goes on from the step after it, as it did when it sent turn k.

Handoffs are not carried: their sequence numbers belong to the original's log. The new
machine's consumed-handoff marker is its own log's position at the fork, so only a handoff
recorded in the new run (by turn k+1 or later) is taken.
"""

from __future__ import annotations

from loops.stepmachine.spec import SESSION_KIND
from runs import budget, dispatch
from runs.budget import HOLD
from runs.errors import Conflict
from runs.executor.spec import spec_for
from runs.models import Iteration, NodeRun

from .context import run_folders
from .git import is_repository
from .machine import MachineState, machine_row
from .rendering import RenderError, render
from .sessions import send_turn
from .steps import StepContext
from .worktrees import own_worktrees

SESSION_STEPS = ("session.create", "session.prompt")
FINISHED = (Iteration.Status.COMPLETED, Iteration.Status.TIMED_OUT, Iteration.Status.FAILED)
FEEDBACK_HEADING = "## Feedback from a person"


def check(point) -> None:
    """A turn the machine sent (and logged its position with)."""
    _position(point)


def _position(point):
    """(the machine's position when turn k was sent, the step that sent it, the spec)."""
    where = f"turn {point.number} of the {point.row.node_id} session"
    sent = _turn_sent(point)
    if sent is None:
        raise Conflict(
            f"{where} was sent before the console logged the machine's position with each "
            "turn: it cannot be forked (turns sent since can)."
        )
    spec = spec_for(point.old)
    try:
        step = spec.step(sent["from_step"])
    except KeyError:
        raise Conflict(
            f"{where} was sent by step {sent['from_step']}, not in this recipe."
        ) from None
    if step.kind not in SESSION_STEPS:
        raise Conflict(f"{where} was sent by {step.id}, which sends no turn.")
    if point.row.state.get("isolation") == "worktree" and not point.row.state.get("base"):
        raise Conflict(
            f"{where} works in a git worktree opened before the console recorded where "
            "worktrees begin: it cannot be forked (sessions opened since can)."
        )
    return sent, step, spec


def _turn_sent(point) -> dict | None:
    event = (
        point.old.events.filter(
            kind="turn_sent",
            step=point.row.node_id,
            data__turn=point.number,
            data__session=point.row.generation + 1,
        )
        .order_by("-seq")
        .first()
    )
    return event.data if event else None


def carry(new, point, counts: dict) -> None:
    sent, step, spec = _position(point)
    sessions = _carry_sessions(new, point)
    repository = new.workdir if is_repository(new.workdir) else None
    own_worktrees(new, point.old, sessions.values(), repository)
    row = machine_row(new, lock=True)  # start_run made it: pending, not started
    state = MachineState(
        current=step.id,
        round=sent["round"],
        ticks=sent["ticks"],
        last_error=sent["last_error"],
        status=sent["status"],
        consumed_seq=new.last_seq,  # handoffs recorded from now on (see the docstring)
    )
    state.progressed()
    ctx = StepContext(new, row, spec, state, repository)
    # A fork's history is not charged to its budget (runs.budget.spent): with nothing spent
    # yet this only refuses a budget that allows no turn at all, as send_prompt would.
    if not budget.allows_next_iteration(new, row, {"action": "node"}):
        raise Conflict("the run's budget allows no turn: give the fork a larger one")
    send_turn(
        ctx, sessions[point.row.pk], _prompt(ctx, step, point), reused=True, feedback=point.feedback
    )
    state.ticks += 1  # the step ticked again, as when it sent turn k
    new.append_event(
        "tick", step.id, number=state.ticks, kind=step.kind, round=state.round, result="advance"
    )
    state.current = step.next or spec.following(step.id) or ""
    if not state.current:  # the last step: the machine ends once the new turn has finished
        state.finishing = step.id
    state.save(row)
    counts["iterations"] = Iteration.objects.filter(run=new, carried_from__isnull=False).count()
    dispatch.send_on_commit("advance_run", new.pk)  # the machine starts where it stands


def _prompt(ctx, step, point) -> str:
    if point.prompt:
        text = point.prompt
    else:
        try:
            text = render(step.prompt, ctx.templates)
        except RenderError as exc:
            raise Conflict(f"{step.id}'s prompt does not render: {exc}") from None
    if point.feedback:
        text = f"{text.rstrip()}\n\n{FEEDBACK_HEADING}\n\n{point.feedback}\n"
    return text


def _carry_sessions(new, point) -> dict[int, NodeRun]:
    """Copies of the sessions open when turn k was sent (old id -> copy), each with its
    turns finished when turn k finished; those still live then are live again."""
    from runs.fork import clone

    sent_at, cutoff = point.it.queued_at, point.it.finished_at
    _keep_session_numbers(new)
    carried = dict(
        NodeRun.objects.filter(run=new, kind=SESSION_KIND)
        .exclude(carried_from=None)
        .values_list("carried_from_id", "pk")
    )
    copies = {old_pk: NodeRun.objects.get(pk=pk) for old_pk, pk in carried.items()}
    rows = NodeRun.objects.filter(
        run=point.old, kind=SESSION_KIND, iteration=0, started_at__lte=sent_at
    ).exclude(pk__in=list(carried))
    for row in rows.order_by("node_id", "generation"):
        turns = Iteration.objects.filter(
            node_run=row, generation=row.generation, status__in=FINISHED, finished_at__lte=cutoff
        )
        if row.pk == point.row.pk:
            turns = turns.filter(number__lte=point.number)
        turns = list(turns.order_by("number"))
        last = turns[-1] if turns else None
        state = _moved(dict(row.state or {}), point.old, new)
        if last is not None and last.session_id:
            state["session_id"] = last.session_id
        live = row.finished_at is None or row.finished_at > sent_at
        copy = clone(
            row,
            run_id=new.pk,
            carried_from_id=row.pk,
            lease_expires_at=None,
            attempts=0,
            state=state,
            iteration_count=last.number if last else 0,
            output=last.output if last else "",
            output_file=last.output_file if last else "",
            output_bytes=last.output_bytes if last else None,
            **(
                {"status": NodeRun.Status.RUNNING, "finished_at": None, "error": ""} if live else {}
            ),
        )
        copy.save()
        copies[row.pk] = copy
        Iteration.objects.bulk_create(
            [
                clone(
                    it,
                    run_id=new.pk,
                    node_run_id=copy.pk,
                    carried_from_id=it.pk,
                    lease_expires_at=None,
                )
                for it in turns
            ]
        )
    return copies


def _keep_session_numbers(new) -> None:
    """runs.fork copies a session that had ended by then as generation 0; a step machine
    numbers a role's sessions by generation (#1, #2, …): give the copies theirs back."""
    for copy in NodeRun.objects.filter(run=new, kind=SESSION_KIND).exclude(carried_from=None):
        generation = copy.carried_from.generation
        if generation != copy.generation:
            NodeRun.objects.filter(pk=copy.pk).update(generation=generation)
            Iteration.objects.filter(node_run=copy).update(generation=generation)


def _moved(state: dict, old, new) -> dict:
    """A session working in the original run's own folder works in the new run's."""
    if state.get("workdir") == str(run_folders(old)[0]):
        state["workdir"] = str(run_folders(new)[0])
    state.pop(HOLD, None)
    return state
