"""What the YAML workflow plugs into the kernel (runs.kinds), registered from
`WorkflowConfig.ready()`. Its nodes and iterations run on the kernel's own executor
(runs.executor), so besides reading its format it keeps the kernel's defaults."""

from __future__ import annotations

import json

from recipes.shell_parts import inline_provider_parts
from runs.decisions import check_room_to_iterate
from runs.executor import loop, steps
from runs.kinds import LoopKind

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
        if node.loop_group is not None:
            if node.loop_group.until_bash:
                parts[f"{where}.loop_group.until_bash"] = node.loop_group.until_bash
            _node_shell_parts(node.loop_group.nodes, f"{where}.", parts)


class WorkflowKind(LoopKind):
    name = "workflow"
    label = "Workflow"
    # Its nodes and loop iterations run on the kernel's executor.
    nodes = dict.fromkeys(NODE_KINDS, steps.start_workflow_node)
    iterations = {"loop": loop.run_loop_iteration}
    read_order = 100  # it reads any YAML mapping: every other kind is asked first
    decides_later = True

    def reads(self, source):
        return read_workflow(source)

    def shell_parts(self, spec) -> dict[str, str]:
        """bash steps, script nodes, until_bash checks (loop_group bodies too), inline
        providers."""
        parts = inline_provider_parts(spec)
        _node_shell_parts(spec.nodes, "nodes.", parts)
        return parts

    def check_decision(self, run, gate, action, comment):
        check_room_to_iterate(run, gate, action, comment)
