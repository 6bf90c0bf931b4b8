"""The step machine's runner: ticks.

A tick executes the current step and moves the pointer. One trigger (the machine's start, a
recorded handoff, a finished turn, a gate decision, `loop tick`) runs at most
MAX_TICKS_PER_TRIGGER ticks, and stops earlier at a `human.wait`, at a final or
intervention-required status, or at a step that waits for something outside (a handoff, a
busy session). `policy.max_ticks` bounds the whole run: reaching it blocks the run.

Each tick is one transaction under the run's lock; only a `gates.run`'s commands run
outside it, fenced by the `steps` node's attempt and lease like any kernel step (the sweep
takes a lost one back and the tick runs again). Work is sent through `runs.dispatch`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from loops.stepmachine.spec import MACHINE_NODE, TICK_TASK
from runs.decisions import fail_rejected
from runs.engine.deadlines import GateDeadline
from runs.executor.spec import SpecError, spec_for
from runs.executor.state import lock_run
from runs.models import Gate, NodeRun, Run
from runs.providers.base import Cancelled

from . import gate_commands, machine
from .git import is_repository
from .machine import MachineState
from .sessions import StepFailed
from .steps import KINDS, StepContext, route_gates

log = logging.getLogger(__name__)
MAX_TICKS_PER_TRIGGER = 10


@dataclass
class TickReport:
    ticks: int = 0
    stopped: str = ""  # why this trigger stopped
    steps: list[str] = field(default_factory=list)


def start(run: Run, row: NodeRun) -> None:
    """The worker that claimed the `steps` node: set the machine up, then tick."""
    with transaction.atomic():
        run = lock_run(run.pk)
        row = NodeRun.objects.select_for_update().get(pk=row.pk)
        if run.is_terminal or row.status != NodeRun.Status.RUNNING:
            return
        spec = spec_for(run)
        state = MachineState.of(row)
        if not state.current and not state.finishing:
            state.current = spec.steps[0].id
            state.progressed()
            run.append_event(
                "machine_started", MACHINE_NODE, first_step=state.current, recipe=spec.id
            )
        state.gates_step = ""  # a take-over re-runs the interrupted gates.run from the start
        state.save(row)
        NodeRun.objects.filter(pk=row.pk, attempts=row.attempts).update(lease_expires_at=None)
    tick(run.pk, trigger="start")


def tick(run_id: int, trigger: str = "trigger") -> TickReport:
    report = TickReport()
    while True:
        outcome = _one_tick(run_id, report)
        if outcome is None:
            return report
        if outcome == "continue":
            continue
        # A gates.run claimed the machine: its commands run here, outside the lock.
        run, row, step, commands, workdir, number = outcome
        try:
            result = gate_commands.execute(
                run, row, row.attempts, step, commands, workdir=workdir, tick=number
            )
        except Cancelled:
            report.stopped = "the run was stopped while its gates ran"
            return report
        if not _gates_done(run_id, row, step, result, report):
            return report


def _one_tick(run_id: int, report: TickReport):
    """One step under the lock: "continue", None (stop), or the gates to run."""
    with transaction.atomic():
        run = lock_run(run_id)
        outcome = _step(run, report)
        if outcome is None:
            _stopped(run)
        return outcome


def _stopped(run: Run | None) -> None:
    """A trigger's ticks stop: the machine has seen what the run logged so far, so the
    sweep's `lost_ticks` wakes it only for what comes after (a lost wake-up)."""
    row = machine.machine_row(run, lock=True) if run is not None else None
    if row is not None and row.status == NodeRun.Status.RUNNING:
        machine.saw_events(run, row)


def _step(run: Run | None, report: TickReport):
    """One step of the machine (the caller holds the run's lock)."""
    ready = _ready(run, report)
    if ready is None:
        return None
    row, state, spec = ready
    step = spec.step(state.current)
    repository = run.workdir if is_repository(run.workdir) else None
    ctx = StepContext(run, row, spec, state, repository)
    try:
        outcome = KINDS[step.kind](ctx, step)
    except StepFailed as exc:
        _count(run, state, step, report, "failed")
        machine.end(run, row, "failed", f"step {step.id} failed: {exc}")
        return None
    if outcome.kind == "budget":
        # The machine waits at this step, holding the budget stop (runs.budget): its
        # state is left as it was, so the step runs again on resume.
        report.stopped = outcome.reason
        return None
    if outcome.kind == "wait":
        if state.waiting != outcome.reason:
            run.append_event("step_waiting", step.id, reason=outcome.reason)
        state.waiting = outcome.reason
        state.save(row)
        report.stopped = outcome.reason
        return None
    state.waiting = ""
    number = _count(run, state, step, report, outcome.kind)
    if outcome.kind == "gates":
        _hold_for_gates(run, row, state, step, outcome)
        return run, row, step, outcome.commands, outcome.workdir, number
    return _apply(run, row, state, step, outcome, report)


def _ready(run: Run | None, report: TickReport):
    """(the machine's row, its state, the spec) when it may take a step now; else None,
    with why in `report` (and the run ended, if it cannot go on)."""
    if run is None or run.is_terminal or machine.waits_for_a_person(run):
        report.stopped = report.stopped or "the run is not active"
        return None
    row = machine.machine_row(run, lock=True)
    if row is not None and row.status == NodeRun.Status.RUNNING and row.state.get("finishing"):
        machine.steps_ran_out(run, row, MachineState.of(row), row.state["finishing"])
        report.stopped = "the steps ended"
        return None
    if row is None or row.status != NodeRun.Status.RUNNING or not row.state.get("current"):
        report.stopped = "the machine is not running (waiting at a gate, or not started)"
        return None
    state = MachineState.of(row)
    if state.gates_step:
        # Its worker goes on ticking when they end; if it was lost, the sweep takes the
        # machine back and the gates run again.
        report.stopped = "this machine's gates are running"
        return None
    try:
        spec = spec_for(run)
    except SpecError as exc:
        machine.end(run, row, "failed", f"the recipe version does not load: {exc}")
        return None
    if report.ticks >= MAX_TICKS_PER_TRIGGER:
        reason = (
            f"paused after {MAX_TICKS_PER_TRIGGER} steps in one go (the limit per "
            "trigger): tick again to continue"
        )
        if state.waiting != reason:
            run.append_event("ticks_paused", state.current, limit=MAX_TICKS_PER_TRIGGER)
        state.waiting = reason
        state.save(row)
        report.stopped = reason
        return None
    if state.ticks >= spec.policy.max_ticks:
        machine.end(run, row, "blocked", f"max_ticks ({spec.policy.max_ticks}) reached")
        report.stopped = "max_ticks reached"
        return None
    return row, state, spec


def _hold_for_gates(run: Run, row: NodeRun, state: MachineState, step, outcome) -> None:
    """A gates.run step: the machine is held (leased, like a kernel step) while its
    commands run outside the lock; its output is theirs from now."""
    state.gates_step = step.id
    state.save(row)
    lease = timezone.now() + timedelta(seconds=settings.LOOP_LEASE_SECONDS)
    NodeRun.objects.filter(pk=row.pk).update(
        lease_expires_at=lease, output="", output_file="", output_bytes=None
    )
    row.lease_expires_at = lease
    run.append_event("gates_started", step.id, gates=[name for name, _ in outcome.commands])


def _count(run: Run, state: MachineState, step, report: TickReport, result: str) -> int:
    state.ticks += 1
    state.progressed()
    report.ticks += 1
    report.steps.append(step.id)
    run.append_event(
        "tick", step.id, number=state.ticks, kind=step.kind, round=state.round, result=result
    )
    return state.ticks


def _apply(run, row, state: MachineState, step, outcome, report: TickReport):
    if outcome.kind == "end":
        state.save(row)
        machine.end(run, row, outcome.status, outcome.reason)
        report.stopped = f"the run is {outcome.status}"
        return None
    if outcome.kind == "pause":
        state.save(row)
        row.pause(
            run,
            kind=Gate.Kind.LOOP,  # empty approve accepts; feedback continues; reject stops
            message=outcome.message,
            fired=["human.wait"],
            decisions=step.decisions,
            approvals=step.approvals,
            label=step.id,
            deadline=GateDeadline.of(step),  # its gate_timeout / on_timeout, if any
        )
        report.stopped = f"waiting for a person at {step.id}"
        return None
    if outcome.next is None:
        machine.steps_ran_out(run, row, state, step.id)
        report.stopped = "the steps ended"
        return None
    state.current = outcome.next
    state.save(row)
    if step.kind == "loop.status":
        run.update_status()  # observing / verifying: the run shows the phase it is in
    return "continue"


def _gates_done(run_id: int, row: NodeRun, step, result, report: TickReport) -> bool:
    """Record the gates' result and route; True to go on ticking."""
    with transaction.atomic():
        run = lock_run(run_id)
        fresh = NodeRun.objects.select_for_update().get(pk=row.pk)
        state = MachineState.of(fresh)
        if (
            run.is_terminal
            or fresh.status != NodeRun.Status.RUNNING
            or fresh.attempts != row.attempts
            or state.gates_step != step.id
        ):
            report.stopped = "the machine was taken over or stopped while its gates ran"
            return False
        state.gates_step = ""
        state.last_error = "" if result.result == "pass" else result.output
        run.append_event(
            "gates_finished",
            step.id,
            result=result.result,
            gates=result.results,
            log=result.log_path,
            tail=result.output[-2000:],
        )
        NodeRun.objects.filter(pk=fresh.pk).update(lease_expires_at=None)
        spec = spec_for(run)
        repository = run.workdir if is_repository(run.workdir) else None
        ctx = StepContext(run, fresh, spec, state, repository)
        try:
            outcome = route_gates(ctx, step, result.result)
        except StepFailed as exc:
            state.save(fresh)
            machine.end(run, fresh, "failed", f"step {step.id} failed: {exc}")
            return False
        if _apply(run, fresh, state, step, outcome, report) == "continue":
            return True
        _stopped(run)
        return False


def gate_decided(run: Run, gate: Gate, row: NodeRun, status: str, actor) -> None:
    """A person decided at a human.wait (inside the decision's transaction)."""
    if status == Gate.Status.REJECTED:
        fail_rejected(run, gate, row, actor)  # the kernel's reject, as for any gate
        machine.close_idle_sessions(run, "the run was rejected")
        return
    spec = spec_for(run)
    state = MachineState.of(row)
    step = spec.step(state.current)
    if status == Gate.Status.ITERATED:
        state.last_error = gate.comment
    # The human.wait's tick was counted when it paused; the gate_decided event says the rest.
    state.current = step.next or spec.following(step.id) or ""
    state.progressed()
    state.save(row)
    row.unpause()
    if not state.current:
        machine.steps_ran_out(run, row, state, step.id)
        return
    from runs import dispatch

    dispatch.send_on_commit(TICK_TASK, run.pk)
