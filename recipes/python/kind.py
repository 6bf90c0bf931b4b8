"""What the Python kind plugs into the kernel (runs.kinds), registered from
`PythonLoopsConfig.ready()`."""

from __future__ import annotations

from django.db.models import Q

from runs.fork import Continuation
from runs.kinds import LoopKind

from . import forking, gates, runner


def continuations() -> dict[str, Continuation]:
    # A driven loop's pipeline steps are `agent` rows too, but outside any loop of their
    # own (no max_iterations): only a Python loop's agents offer a fork.
    return {
        "agent": Continuation(
            forking.check,
            forking.carry,
            offers=lambda row: bool(row.max_iterations),
            edits_prompt=True,
        )
    }


def python_loops() -> LoopKind:
    return LoopKind(
        name="python",
        label="Python loop",
        nodes={"python": runner.execute},  # the recipe's `workflow` node
        gate_decided=gates.gate_decided,
        continuations=continuations,
        # The inbox: the script's agents, each a loop of its own (max_iterations).
        loop_rows=Q(kind="agent", max_iterations__isnull=False),
    )
