"""What driven loops plug into the kernel (runs.kinds), registered from
`LoopsConfig.ready()`."""

from __future__ import annotations

from django.db.models import Q

from runs.kinds import LoopKind

from . import surfaces


def driven_loops() -> LoopKind:
    return LoopKind(
        name="driven",
        label="Driven loop",
        run_parts=surfaces.RUN_PARTS,
        urls=surfaces.URLS,
        api_router=surfaces.API_ROUTER,
        api_prefix=surfaces.API_PREFIX,
        loop_rows=Q(kind="agent"),  # the pipeline's steps, each an agent's row
    )
