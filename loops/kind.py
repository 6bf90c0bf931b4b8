"""What driven loops plug into the kernel (runs.kinds), registered from
`LoopsConfig.ready()`."""

from __future__ import annotations

from django.db.models import Q

from recipes.formats.driven import KIND
from runs.fork import Continuation
from runs.kinds import LoopKind

from . import forking, runner, surfaces


def _pipeline_step(row) -> bool:
    # A Python loop's agents have max_iterations: answered without reading the run's rows.
    return not row.max_iterations and forking.is_driven_step(row)


def continuations() -> dict[str, Continuation]:
    """The host's turns, and the pipeline steps: `agent` rows, a kind a Python loop's agents
    share (runs.fork asks which of the two offers a row)."""
    return {
        KIND: Continuation(forking.check, forking.carry),
        "agent": Continuation(forking.check, forking.carry, offers=_pipeline_step),
    }


def driven_loops() -> LoopKind:
    return LoopKind(
        name=KIND,
        label="Driven loop",
        nodes={KIND: runner.execute},  # the host's node
        continuations=continuations,
        run_parts=surfaces.RUN_PARTS,
        urls=surfaces.URLS,
        api_router=surfaces.API_ROUTER,
        api_prefix=surfaces.API_PREFIX,
        loop_rows=Q(kind="agent"),  # the pipeline's steps, each an agent's row
    )
