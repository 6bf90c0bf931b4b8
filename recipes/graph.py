"""A recipe's nodes as nested layers, for a graph readable without JavaScript.

Layer k holds the nodes whose dependencies all sit in earlier layers (the spec computes the
layers with runs.engine.dag, the one DAG module); a loop_group carries
its body as layers of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class GraphNode:
    id: str
    kind: str
    depends_on: list[str]
    details: list[str]
    body: list[list[GraphNode]] = field(default_factory=list)


def graph(spec) -> list[list[GraphNode]]:
    """Layers of a workflow spec; an empty list for specs without nodes."""
    nodes = getattr(spec, "nodes", None)
    if not nodes:
        return []
    return _as_graph_nodes(spec.layers(), {node.id: node for node in nodes})


def _as_graph_nodes(layer_ids: list[list[str]], by_id: dict) -> list[list[GraphNode]]:
    return [[_node(by_id[node_id]) for node_id in layer] for layer in layer_ids]


def _node(node) -> GraphNode:
    body = []
    if node.loop_group is not None:
        body = _as_graph_nodes(node.loop_group.layers(), {n.id: n for n in node.loop_group.nodes})
    return GraphNode(
        id=node.id,
        kind=node.kind,
        depends_on=list(node.depends_on),
        details=_details(node),
        body=body,
    )


def _details(node) -> list[str]:
    details = list(getattr(node, "details", ()) or ())  # a kind's own words (driven)
    loop = node.loop or node.loop_group
    if loop is not None:
        for name in ("until", "until_bash", "until_field"):
            value = getattr(loop, name, None)
            if value:
                details.append(f"{name}: {value}")
        details.append(f"at most {loop.max_iterations} iterations")
        if loop.interactive:
            details.append("interactive: a person decides after each iteration")
    if getattr(node, "runtime", None):
        where = getattr(node, "script_path", None)
        details.append(
            f"runtime: {node.runtime}" + (f" — {where.rsplit('/', 1)[-1]}" if where else "")
        )
    if getattr(node, "workflow", None):
        fan_out = node.fan_out
        details.append(
            f"child runs of {node.workflow}"
            + (
                f", one per item of {fan_out.items} (at most {fan_out.max_parallel} at once, "
                f"join {fan_out.join})"
                if fan_out
                else ""
            )
        )
    if node.approval is not None:
        choices = ", ".join(d.label for d in node.approval.decisions)
        details.append("approval" + (f" — {choices}" if choices else ""))
    if node.when:
        details.append(f"when {node.when}")
    if node.trigger_rule != "all_success":
        details.append(f"trigger rule: {node.trigger_rule}")
    if node.provider:
        details.append(f"provider: {node.provider}")
    return details
