"""What each step kind does when the runner reaches it (the caller holds the run's lock).

A step returns what happens next: advance to a step, wait (nothing to do until something
outside happens), run gate commands (outside the lock), pause at a gate, or end the run.
Template errors and impossible steps raise StepFailed: the run fails with the message.
"""

from __future__ import annotations

from dataclasses import dataclass

from runs.models import NodeRun, Run

from . import handoffs, sessions
from .context import template_context
from .machine import FINAL_STATUSES, STOPPING_STATUSES, MachineState, latest_session
from .rendering import RenderError, render
from .sessions import Blocked, BudgetStopped, StepFailed


@dataclass
class StepContext:
    run: Run
    row: NodeRun  # the machine
    spec: object
    state: MachineState
    repository: str | None

    @property
    def templates(self) -> dict:
        return template_context(self.run, self.spec, self.state)


@dataclass
class Outcome:
    kind: str  # advance / wait / gates / pause / end / budget (stopped by the run's budget)
    next: str | None = None
    reason: str = ""
    status: str = ""
    commands: list | None = None
    workdir: str = ""
    message: str = ""


def advance(ctx: StepContext, step, target: str | None = None) -> Outcome:
    return Outcome("advance", next=target or step.next or ctx.spec.following(step.id))


def _render(ctx: StepContext, step, field: str, source: str) -> str:
    try:
        return render(source, ctx.templates)
    except RenderError as exc:
        raise StepFailed(f"template error in {field}: {exc}") from None


def session_step(ctx: StepContext, step) -> Outcome:
    create = step.kind == "session.create"
    prompt = _render(ctx, step, "prompt", step.prompt)
    branch = _render(ctx, step, "branch", step.branch).strip() if step.branch else None
    if step.branch and not branch:
        raise StepFailed("branch: the template rendered an empty branch name")
    try:
        waiting = sessions.send_prompt(ctx, step.role, prompt, branch=branch, create=create)
    except Blocked as exc:
        return Outcome("end", status="blocked", reason=str(exc))
    except BudgetStopped:
        return Outcome("budget", reason="stopped by the run's budget before this turn")
    if waiting:
        return Outcome("wait", reason=waiting)
    return advance(ctx, step)


def handoff_wait(ctx: StepContext, step) -> Outcome:
    handoff = handoffs.take(ctx.run, ctx.row, ctx.state, step.from_, step.id)
    if handoff is None:
        session = latest_session(ctx.run, step.from_)
        if session is not None and session.status == NodeRun.Status.FAILED:
            # Its turn could not run (no provider, the agent crashed): nothing will ever
            # hand off, so a person must step in rather than the run wait for good.
            return Outcome(
                "end",
                status="blocked",
                reason=f"the {step.from_} role cannot hand off: its session failed "
                f"({session.error})",
            )
        return Outcome("wait", reason=f"waiting for a handoff from {step.from_}")
    ctx.state.last_error = handoff.summary
    ctx.run.append_event(
        "handoff_consumed", step.id, role=handoff.role, status=handoff.status, handoff=handoff.pk
    )
    target = step.on.get(handoff.status)
    if target is None and handoff.status == "completed":
        return advance(ctx, step)
    if target is None:
        raise StepFailed(
            f"the {handoff.role} handed off '{handoff.status}', which on: does not route"
        )
    return advance(ctx, step, target)


def gates_run(ctx: StepContext, step) -> Outcome:
    from . import gate_commands

    try:
        commands = gate_commands.prepare(step, ctx.templates)
    except RenderError as exc:
        raise StepFailed(f"template error in a gate command: {exc}") from None
    session = latest_session(ctx.run, step.role)
    workdir = (session.state.get("workdir") if session else None) or ctx.repository
    if not workdir:
        from .context import run_folders

        workdir = str(run_folders(ctx.run)[0])
    return Outcome("gates", commands=commands, workdir=workdir)


def route_gates(ctx: StepContext, step, result: str) -> Outcome:
    target = step.on.get(result)
    if target is None and result == "pass":
        return advance(ctx, step)
    if target is None:
        raise StepFailed(f"the gates ended '{result}', which on: does not route")
    return advance(ctx, step, target)


def human_wait(ctx: StepContext, step) -> Outcome:
    return Outcome("pause", message=_render(ctx, step, "prompt", step.prompt).strip())


def round_next(ctx: StepContext, step) -> Outcome:
    limit = ctx.spec.policy.max_rounds
    if ctx.state.round >= limit:
        return Outcome("end", status="blocked", reason=f"max_rounds ({limit}) reached")
    ctx.state.round += 1
    ctx.run.append_event("round_started", step.id, round=ctx.state.round, max_rounds=limit)
    return Outcome("advance", next=step.next)


def loop_status(ctx: StepContext, step) -> Outcome:
    status = step.status
    if status in FINAL_STATUSES or status in STOPPING_STATUSES:
        said = ctx.state.last_error.strip()
        reason = f"step {step.id} set the run to {status}" + (f": {said[:2000]}" if said else "")
        return Outcome("end", status=status, reason=reason)
    ctx.state.status = status  # observing / verifying: the run goes on in that phase
    return advance(ctx, step)


def loop_event(ctx: StepContext, step) -> Outcome:
    ctx.run.append_event("loop_event", step.id, event=step.event_kind, round=ctx.state.round)
    return advance(ctx, step)


KINDS = {
    "session.create": session_step,
    "session.prompt": session_step,
    "handoff.wait": handoff_wait,
    "gates.run": gates_run,
    "human.wait": human_wait,
    "round.next": round_next,
    "loop.status": loop_status,
    "loop.event": loop_event,
}
