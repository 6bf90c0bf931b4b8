"""What the step machine plugs into the kernel (runs.kinds), registered from
`StepMachineConfig.ready()`."""

from __future__ import annotations

from recipes.formats.planeai_spec import MACHINE_KIND, SESSION_KIND
from runs.fork import Continuation
from runs.kinds import LoopKind

from . import demo, forking, machine, runner, start, surfaces, sweep, tasks, turns


def continuations() -> dict[str, Continuation]:
    return {SESSION_KIND: Continuation(forking.check, forking.carry)}  # its session turns


def step_machine() -> LoopKind:
    return LoopKind(
        name="planeai",
        label="Step machine",
        nodes={MACHINE_KIND: runner.start},
        iterations={SESSION_KIND: turns.run_turn},
        check_start=start.check_run_start,
        check_repository=start.check_repository,
        created=start.created,
        gate_decided=runner.gate_decided,
        derived_status=machine.derived_status,
        continuations=continuations,
        sweep_passes=(sweep.resend_lost_ticks, sweep.mark_stale_machines),
        run_parts=surfaces.RUN_PARTS,
        run_context=surfaces.run_context,
        urls=surfaces.URLS,
        api_router=surfaces.API_ROUTER,
        api_prefix=surfaces.API_PREFIX,
        loop_commands=surfaces.LOOP_COMMANDS,
        tasks={"tick_machine": tasks.tick_machine},
        event_sentence=surfaces.event_sentence,
        demo=(demo.plays_role, demo.role_turn),
        own_worktrees=True,
        rerun_keeps_workdir=True,
        resume_refused=(
            "A step-machine run cannot be resumed (its sessions and handoffs belong to "
            "that run): re-run it instead."
        ),
        loop_rows=surfaces.LOOP_ROWS,
        needs_a_person=surfaces.NEEDS_A_PERSON,
        person_action=surfaces.person_action,
    )
