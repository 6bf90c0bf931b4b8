"""What the Python kind plugs into the kernel (runs.kinds), registered from
`PythonLoopsConfig.ready()`."""

from __future__ import annotations

from pathlib import Path

from django.db.models import Q

from runs.fork import Continuation
from runs.kinds import LoopKind

from . import forking, gates, runner
from .format import RECIPE_KIND, is_python_path, parse_python


class PythonKind(LoopKind):
    name = RECIPE_KIND
    read_order = -1  # known by its file name, before any kind decodes the text as YAML
    reads_yaml = False
    label = "Python loop"
    nodes = {"python": runner.execute}  # the recipe's `workflow` node
    # The inbox: the script's agents, each a loop of its own (max_iterations).
    loop_rows = Q(kind="agent", max_iterations__isnull=False)  # the agents with a loop
    # Its agents' rows are reported by the `workflow` node (they are not graph nodes).
    rows_outside_graph = ("agent",)
    # Python recipes are code from a recipe folder: edited in their file, then synced.
    source_read_only = "a Python recipe is read-only here: edit its .py file, then sync"

    def reads(self, source):
        if not is_python_path(source.path):
            return None
        fallback = source.options.provider_fallback
        return parse_python(source.text, Path(source.path).stem, provider_fallback=fallback)

    def shell_parts(self, spec) -> dict[str, str]:
        """A Python recipe is code from start to end (they come from recipe folders only)."""
        return {"source": spec.source}

    def gate_decided(self, run, gate, node_run, status, actor):
        gates.gate_decided(run, gate, node_run, status, actor)

    def continuations(self):
        # Only an agent that loops (max_iterations) has iterations to fork from.
        return {
            "agent": Continuation(
                forking.check,
                forking.carry,
                offers=lambda row: bool(row.max_iterations),
                edits_prompt=True,
            )
        }
