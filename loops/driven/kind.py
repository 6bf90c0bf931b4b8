"""What driven loops plug into the kernel (runs.kinds), registered from
`DrivenLoopsConfig.ready()`."""

from __future__ import annotations

import json

from django.db.models import Q

from recipes.shell_parts import inline_provider_parts
from runs.fork import Continuation
from runs.kinds import LoopKind

from . import forking, runner, surfaces
from .format import KIND, is_driven, parse_driven
from .spec import PIPELINE_STEP


class DrivenKind(LoopKind):
    name = KIND
    label = "Driven loop"
    nodes = {KIND: runner.execute}  # the host's node
    run_parts = surfaces.RUN_PARTS
    urls = surfaces.URLS
    api_router = surfaces.API_ROUTER
    api_prefix = surfaces.API_PREFIX
    loop_rows = Q(kind=PIPELINE_STEP)  # the pipeline's steps, each an agent's row
    # Rows outside the recipe's graph: a failed step is the host's to handle.
    rows_outside_graph = (PIPELINE_STEP,)
    asks_message = True  # the host is given the message as its task

    def reads(self, source):
        if source.mapping is None or not is_driven(source.mapping):
            return None
        options = source.options
        return parse_driven(
            source.mapping, source.lines, provider_fallback=options.default_provider()
        )

    def shell_parts(self, spec) -> dict[str, str]:
        """Inline providers (as a workflow's) and the hooks the worker will call."""
        parts = inline_provider_parts(spec)
        for agent_id, agent in (spec.agents or {}).items():
            loop = getattr(agent, "loop", None)
            hooks = getattr(loop, "hooks", None) if loop is not None else None
            if hooks:
                data = hooks.model_dump() if hasattr(hooks, "model_dump") else dict(hooks)
                parts[f"agents.{agent_id}.loop.hooks"] = json.dumps(data, sort_keys=True)
        return parts

    def continuations(self):
        """The host's turns, and the pipeline steps."""
        return {
            KIND: Continuation(forking.check, forking.carry),
            PIPELINE_STEP: Continuation(forking.check, forking.carry),
        }
