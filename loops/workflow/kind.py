"""What the YAML workflow plugs into the kernel (runs.kinds), registered from
`WorkflowConfig.ready()`: its format, its nodes (steps.py: bash, script and prompt steps,
approvals, cancel; loop.py, group.py, subrun.py), its loop iterations, the passes of the
sweep and the forks of its loops. Gates keep the kernel's meaning of a decision."""

from __future__ import annotations

import json

from django.db.models import Q

from recipes.shell_parts import inline_provider_parts
from runs.decisions import check_room_to_iterate
from runs.kinds import LoopKind
from runs.models import NodeRun

from . import forking, group, loop, steps, subrun, sweep
from .format import read_workflow
from .spec import NODE_KINDS


def _node_shell_parts(nodes, prefix: str, parts: dict[str, str]) -> None:
    for node in nodes:
        where = f"{prefix}{node.id}"
        if node.bash is not None:
            parts[f"{where}.bash"] = node.bash
        if getattr(node, "script", None) is not None:  # code run by uv or bun, its packages
            script = {"script": node.script, "runtime": node.runtime, "deps": node.deps}
            parts[f"{where}.script"] = json.dumps(script, sort_keys=True)
        if node.loop is not None and node.loop.until_bash:
            parts[f"{where}.loop.until_bash"] = node.loop.until_bash
        if node.loop is not None and (node.loop.score or {}).get("bash"):
            parts[f"{where}.loop.score.bash"] = node.loop.score["bash"]
        if node.loop_group is not None:
            if node.loop_group.until_bash:
                parts[f"{where}.loop_group.until_bash"] = node.loop_group.until_bash
            _node_shell_parts(node.loop_group.nodes, f"{where}.", parts)


class WorkflowKind(LoopKind):
    name = "workflow"
    label = "Workflow"
    nodes = dict.fromkeys(NODE_KINDS, steps.start)
    iterations = {NodeRun.Kind.LOOP: loop.run_loop_iteration}
    sweep_passes = (sweep.expired_group_checks, sweep.waiting_parents)
    loop_rows = Q(kind__in=[NodeRun.Kind.LOOP, NodeRun.Kind.LOOP_GROUP])
    read_order = 100  # it reads any YAML mapping: every other kind is asked first
    decides_later = True

    def reads(self, source):
        return read_workflow(source)

    def shell_parts(self, spec) -> dict[str, str]:
        """bash steps, script nodes, until_bash checks and score commands (loop_group
        bodies too), inline providers."""
        parts = inline_provider_parts(spec)
        _node_shell_parts(spec.nodes, "nodes.", parts)
        return parts

    def check_decision(self, run, gate, status):
        check_room_to_iterate(run, gate, status)

    def begin_iteration(self, run, node_run, number, *, feedback="", after_gate=False):
        if node_run.kind == NodeRun.Kind.LOOP_GROUP:  # its body runs again
            return group.begin_next(run, node_run, number, feedback=feedback, after_gate=after_gate)
        return super().begin_iteration(
            run, node_run, number, feedback=feedback, after_gate=after_gate
        )

    def advance_within(self, run, spec):
        group.advance_bodies(run, spec)
        subrun.advance_waiting(run, spec)

    def continuations(self):
        return forking.CONTINUATIONS
