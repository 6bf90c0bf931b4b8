"""The rules of ``depends_on`` in a workflow's nodes: each name is a sibling (a loop_group
body is sealed), the graph has no cycle, and a dependency on an ``include`` block waits
for the block's last nodes (its ``$id.output`` is the block's output).

``loops.workflow.format_rules`` calls them for the top level and each loop_group body.
"""

from __future__ import annotations

from typing import Any

from loops.workflow.include import rename_outputs, rewrite_strings
from recipes.formats.rule_context import RuleContext
from recipes.problems import child_path, short_repr
from runs.engine.dag import find_cycles


def through_aliases(node: Any, aliases: dict[str, tuple[list[str], str]]) -> Any:
    """`depends_on: [review]` waits for the block's last nodes; `$review.output` is its output."""
    if not isinstance(node, dict):
        return node
    outputs = {alias: primary for alias, (_, primary) in aliases.items()}
    node = rewrite_strings(node, lambda text: rename_outputs(text, outputs))
    deps = node.get("depends_on")
    if isinstance(deps, list):
        wired: list = []
        for dep in deps:
            for target in aliases[dep][0] if dep in aliases else [dep]:
                if target not in wired:
                    wired.append(target)
        node["depends_on"] = wired
    return node


def check_depends(
    deps: list,
    node_path: str,
    label: str,
    ctx: RuleContext,
    group: str | None,
    scope_ids: set[str],
    outer_ids: frozenset[str],
) -> list[tuple[str, str]]:
    valid: list[tuple[str, str]] = []
    for j, dep in enumerate(deps):
        dep_path = child_path(child_path(node_path, "depends_on"), j)
        if not isinstance(dep, str):
            continue  # pydantic reports the type
        if dep in scope_ids:
            valid.append((dep, dep_path))
        elif group is not None and dep in outer_ids:
            ctx.error(
                dep_path,
                f"{label} in loop_group {short_repr(group)} cannot depend on outer node {short_repr(dep)}: "
                "a loop_group body is sealed, so depends_on may only name sibling body "
                "nodes (read outer results through $" + dep + ".output instead)",
            )
        else:
            ctx.error(dep_path, f"{label} depends on unknown node {short_repr(dep)}")
    return valid


def check_cycles(
    edges: dict[str, list[tuple[str, str]]], node_paths: dict[str, str], ctx: RuleContext
) -> None:
    order = {node_id: i for i, node_id in enumerate(node_paths)}
    graph = {node_id: [dep for dep, _ in deps] for node_id, deps in edges.items()}
    for ring in find_cycles(graph, list(order)):
        # ``ring`` starts at its first-declared member, which depends on ring[1].
        first, target = ring[0], ring[1] if len(ring) > 1 else ring[0]
        dep_path = next(p for dep, p in edges[first] if dep == target)
        text = " -> ".join([*ring, first])
        ctx.error(dep_path, f"dependency cycle: {text} (each node depends on the next)")
