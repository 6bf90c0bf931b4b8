"""What the step machine plugs into the kernel (runs.kinds), registered from
`StepMachineConfig.ready()`."""

from __future__ import annotations

from runs.kinds import LoopKind

from . import start, surfaces


def step_machine() -> LoopKind:
    return LoopKind(
        name="planeai",
        label="Step machine",
        check_repository=start.check_repository,
        run_parts=surfaces.RUN_PARTS,
        run_context=surfaces.run_context,
        urls=surfaces.URLS,
        api_router=surfaces.API_ROUTER,
        api_prefix=surfaces.API_PREFIX,
        loop_commands=surfaces.LOOP_COMMANDS,
        event_sentence=surfaces.event_sentence,
        loop_rows=surfaces.LOOP_ROWS,
        needs_a_person=surfaces.NEEDS_A_PERSON,
        person_action=surfaces.person_action,
        resume_refused=(
            "A step-machine run cannot be resumed (its sessions and handoffs belong to "
            "that run): re-run it instead."
        ),
    )
