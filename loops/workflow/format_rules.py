"""Structural and cross-field rules for ``kind: workflow`` recipes.

``check_workflow`` walks the raw document, records positioned errors and warnings
on a :class:`RuleContext`, and returns a cleaned copy (ignored fields dropped,
node kinds derived, command files loaded) for pydantic to type-check.  Rules stay
quiet about values of the wrong type: pydantic reports those.

A rule about one node that only reports (it does not reshape the node) is a function
in ``NODE_RULES``: add one there to check something new about every node. The rules
of ``depends_on`` (names, cycles, include blocks) are in loops.workflow.depends_rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loops.workflow.depends_rules import check_cycles, check_depends, through_aliases
from loops.workflow.include import expand_include
from loops.workflow.loop_prev_rules import check_loop_prev_references
from loops.workflow.peer_meaning import with_peer_meaning
from loops.workflow.script_rules import check_bindings, check_script
from loops.workflow.subrun_rules import check_workflow_node, fan_out_without_workflow
from loops.workflow.top_rules import (
    check_provider_commands,
    check_provider_named,
    check_returns,
    take_block_providers,
)
from recipes.formats.budget import check_budget_field
from recipes.formats.field_rules import (
    check_approval,
    check_controls,
    check_gate_deadline,
    check_input,
    check_loop,
    check_output_schema,
    load_command,
    nested_group_error,
)
from recipes.formats.repo_config import resolve_model_aliases
from recipes.formats.rule_context import (
    COMMON_NODE_FIELDS,
    FOREIGN_NODE_FIELDS,
    GROUP_FIELDS,
    ID_PATTERN,
    KIND_FIELDS,
    KIND_KEYS,
    KIND_LIST,
    LOOP_DISCARDED_FIELDS,
    TOP_LEVEL_FIELDS,
    UNSUPPORTED_KIND_KEYS,
    RuleContext,
    drop_nulls,
    is_blank,
    require_text,
)
from recipes.formats.sandbox import check_sandbox_fields
from recipes.problems import child_path, short_repr
from runs.engine.shell_checks import checked_at_start
from runs.engine.shell_context import shell_report

__all__ = ["NODE_RULES", "NodeRule", "NodeSite", "check_workflow"]


@dataclass(frozen=True)
class NodeSite:
    """One authored node as a rule sees it: the raw mapping and where it sits."""

    raw: dict
    path: str
    label: str  # how messages name the node: "node 'build'" or "node #3"
    kind: str | None  # derived from the kind key; None when that is already an error
    group: str | None  # id of the enclosing loop_group, None at the top level


NodeRule = Callable[[NodeSite, RuleContext], None]


def _timeout_applies(node: NodeSite, ctx: RuleContext) -> None:
    if node.raw.get("timeout") is not None and node.kind not in ("bash", "script", "workflow"):
        ctx.warn(
            child_path(node.path, "timeout"),
            f"{node.label}: 'timeout' only applies to bash and script nodes",
        )


def _shell_references(node: NodeSite, ctx: RuleContext) -> None:
    """References bash would run as code (arithmetic, subscripts, eval, '...')."""
    scripts = [(child_path(node.path, "bash"), node.raw.get("bash"))]
    for block in ("loop", "loop_group"):
        if isinstance(node.raw.get(block), dict):
            until_path = child_path(child_path(node.path, block), "until_bash")
            scripts.append((until_path, node.raw[block].get("until_bash")))
    score = node.raw["loop"].get("score") if isinstance(node.raw.get("loop"), dict) else None
    if isinstance(score, dict):
        score_path = child_path(child_path(child_path(node.path, "loop"), "score"), "bash")
        scripts.append((score_path, score.get("bash")))
    for path, script in scripts:
        if isinstance(script, str):
            checked = path == scripts[0][0]  # a bash step checks values when it starts
            errors, warnings = shell_report(
                ctx.lines, path, script, node.label, start_checks=checked
            )
            ctx.errors.extend(errors)
            ctx.warnings.extend(warnings)


def _no_gate_when_unattended(node: NodeSite, ctx: RuleContext) -> None:
    """An unattended recipe's runs have nobody to decide: a gate in one would wait forever."""
    if not ctx.workflow_unattended:
        return
    gate = "an approval" if node.kind == "approval" else ""
    for block in ("loop", "loop_group"):
        if isinstance(node.raw.get(block), dict) and node.raw[block].get("interactive") is True:
            gate = f"an interactive {block}"
    if gate:
        ctx.error(
            node.path,
            f"{node.label} is {gate}, a gate: an unattended recipe (unattended: true) may "
            "not contain one, nobody would decide it",
        )


# Rules that report about every node (top level and loop_group bodies), in this order.
NODE_RULES: list[NodeRule] = [
    _timeout_applies,
    _shell_references,
    check_loop_prev_references,
    _no_gate_when_unattended,
]


# ------------------------------------------------------------------------ top level


def check_workflow(data: dict, ctx: RuleContext) -> dict:
    for key in data:
        if key not in TOP_LEVEL_FIELDS:
            ctx.warn(child_path("", key), f"unknown top-level field {short_repr(key)} is ignored")
    cleaned = {k: v for k, v in data.items() if k in TOP_LEVEL_FIELDS}
    ctx.workflow_interactive = data.get("interactive") is True
    ctx.workflow_unattended = data.get("unattended") is True

    if data.get("name") is None:
        ctx.error("name", "a workflow needs a 'name'")
    elif is_blank(data["name"]):
        ctx.error("name", "must not be empty")
    if cleaned.get("description") is None:
        cleaned["description"] = ""
    cleaned = drop_nulls(cleaned, keep=("name", "nodes"))

    if "budget" in cleaned:
        cleaned["budget"] = check_budget_field(cleaned["budget"], "budget", ctx) or {}
    check_sandbox_fields(cleaned, "", ctx, cleaned)

    inputs = cleaned.get("inputs")
    if isinstance(inputs, dict):
        cleaned["inputs"] = {name: check_input(name, spec, ctx) for name, spec in inputs.items()}

    check_provider_commands(cleaned.get("providers"), ctx)
    resolve_model_aliases(cleaned, "", "the workflow", ctx)
    if ctx.resources is not None and ctx.resources.default_assistant:
        cleaned["default_provider"] = ctx.resources.default_assistant

    nodes = data.get("nodes")
    if nodes is None:
        ctx.error("nodes", "a workflow needs a non-empty 'nodes' list")
    elif not isinstance(nodes, list):
        ctx.error("nodes", "must be a list of nodes")
    elif not nodes:
        ctx.error("nodes", "must contain at least one node")
    else:
        cleaned["nodes"] = _check_nodes(nodes, "nodes", ctx, group=None, outer_ids=frozenset())
        take_block_providers(cleaned, ctx)
        check_returns(cleaned, ctx)
        check_provider_named(cleaned, ctx)
    return cleaned


# ---------------------------------------------------------------------------- nodes


def _check_nodes(
    items: list, path: str, ctx: RuleContext, *, group: str | None, outer_ids: frozenset[str]
) -> list:
    scope_ids = {
        item["id"] for item in items if isinstance(item, dict) and isinstance(item.get("id"), str)
    }
    visible = outer_ids | scope_ids  # what a nested loop_group body can see outside itself
    first_line: dict[str, int | None] = {}
    cleaned: list = []
    edges: dict[str, list[tuple[str, str]]] = {}  # id -> [(dep, path of the dep entry)]
    node_paths: dict[str, str] = {}
    aliases: dict[str, tuple[list[str], str]] = {}  # include id -> (its last nodes, output)
    for index, raw in enumerate(items):
        node_path = child_path(path, index)
        if not isinstance(raw, dict):
            ctx.error(
                node_path, f"each node must be a mapping with an 'id' and one of: {KIND_LIST}"
            )
            cleaned.append(raw)
            continue
        node_id = raw.get("id")
        label = f"node {short_repr(node_id)}" if isinstance(node_id, str) else f"node #{index + 1}"
        _check_id(node_id, node_path, label, ctx, group, first_line, node_paths)
        if "include" in raw:
            cleaned.extend(_included(raw, node_path, label, ctx, group, visible, aliases))
        else:
            cleaned.append(_check_node(raw, node_path, label, ctx, group, visible))
        deps = raw.get("depends_on")
        if isinstance(deps, list):
            valid = check_depends(deps, node_path, label, ctx, group, scope_ids, outer_ids)
            if isinstance(node_id, str) and node_paths.get(node_id) == node_path:
                edges[node_id] = valid
    check_cycles(edges, node_paths, ctx)
    ctx.aliases = aliases  # read by the caller at once (top level: returns; a group: until)
    if aliases:
        cleaned = [through_aliases(node, aliases) for node in cleaned]
    return cleaned


def _check_id(
    node_id,
    path: str,
    label: str,
    ctx: RuleContext,
    group: str | None,
    first_line: dict[str, int | None],
    node_paths: dict[str, str],
) -> None:
    """A node's id: given, well formed and not used before in its scope; a good one is
    noted in `first_line` and `node_paths`."""
    if node_id is None:
        ctx.error(path, f"{label} has no 'id'")
    elif isinstance(node_id, str):
        id_path = child_path(path, "id")
        if not ID_PATTERN.fullmatch(node_id):
            ctx.error(
                id_path,
                f"invalid node id {short_repr(node_id)}: use letters, digits, '_' or '-', "
                "starting with a letter or '_'",
            )
        elif node_id in first_line:
            where = "in this loop_group body" if group else "in this workflow"
            ctx.error(
                id_path,
                f"duplicate node id {short_repr(node_id)} {where} "
                f"(first defined on line {first_line[node_id]})",
            )
        else:
            first_line[node_id] = ctx.lines.line(id_path)
            node_paths[node_id] = path


def _included(
    raw: dict,
    path: str,
    label: str,
    ctx: RuleContext,
    group: str | None,
    visible: frozenset,
    aliases: dict[str, tuple[list[str], str]],
) -> list:
    """The nodes an `include` node stands for; its id becomes an alias of the block's last
    nodes and output (in `aliases`)."""
    node_id = raw.get("id")
    expansion = expand_include(raw, path, label, ctx, visible)
    if expansion is not None and group is not None:
        for inner in expansion.nodes:
            if isinstance(inner, dict) and inner.get("kind") == "loop_group":
                ctx.error(path, nested_group_error(label, group))
                break
    if expansion is None or not isinstance(node_id, str):
        # Already an error: stand in for the node so nothing else trips on it.
        return [{"id": node_id, "kind": "cancel", "cancel": "include"}]
    aliases[node_id] = (expansion.sinks, expansion.primary)
    ctx.block_providers.update(expansion.providers)
    return expansion.nodes


def _node_kind(raw: dict, path: str, label: str, ctx: RuleContext, group: str | None) -> str | None:
    for key in UNSUPPORTED_KIND_KEYS:
        if key not in raw:
            continue
        ctx.error(
            child_path(path, key),
            f"{label}: field {short_repr(key)}: node kind {short_repr(key)} is not supported by Loop Console",
        )
    kinds = [key for key in KIND_KEYS if key in raw]
    unsupported = any(key in raw for key in UNSUPPORTED_KIND_KEYS)
    if len(kinds) == 1:
        return kinds[0]
    if not kinds and not unsupported:
        ctx.error(path, f"{label} has no kind: give it exactly one of {KIND_LIST}")
    elif len(kinds) > 1:
        ctx.error(
            child_path(path, kinds[1]),
            f"{label} has several kinds ({', '.join(kinds)}); use exactly one of {KIND_LIST}",
        )
    return None


def _check_node(
    raw: dict, path: str, label: str, ctx: RuleContext, group: str | None, visible: frozenset
) -> dict:
    raw = with_peer_meaning(raw)
    kind = _node_kind(raw, path, label, ctx, group)
    out = drop_nulls(_known_fields(raw, path, label, kind, ctx), keep=("id", *KIND_KEYS))
    check_sandbox_fields(out, path, ctx, out)
    resolve_model_aliases(out, path, label, ctx)
    if kind is not None:
        out["kind"] = kind
    _check_kind_fields(out, path, label, kind, ctx)
    for rule in NODE_RULES:
        rule(NodeSite(raw, path, label, kind, group), ctx)
    fan_out_without_workflow(raw, path, label, ctx)
    if "with" in out and kind in ("script", "command"):
        out["bindings"] = check_bindings(out.pop("with"), child_path(path, "with"), label, ctx)
    _check_kind_block(raw, out, path, label, kind, ctx, group, visible)
    return out


def _known_fields(raw: dict, path: str, label: str, kind: str | None, ctx: RuleContext) -> dict:
    """The node's fields its kind uses; each other one is warned about and left out."""
    is_loop = kind in ("loop", "loop_group")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        key_path = child_path(path, key)
        if key in COMMON_NODE_FIELDS or key in KIND_KEYS or key in KIND_FIELDS.get(kind, ()):
            out[key] = value
        elif key in UNSUPPORTED_KIND_KEYS or key == "fan_out":
            continue
        elif is_loop and key in LOOP_DISCARDED_FIELDS:
            ctx.warn(
                key_path,
                f"{label}: field {short_repr(key)} has no effect on loop nodes and is discarded",
            )
        elif key in FOREIGN_NODE_FIELDS:
            ctx.warn(
                key_path,
                f"{label}: field {short_repr(key)} is not used by Loop Console and is ignored",
            )
        else:
            ctx.warn(key_path, f"{label}: unknown field {short_repr(key)} is ignored")
    return out


def _check_kind_fields(
    out: dict, path: str, label: str, kind: str | None, ctx: RuleContext
) -> None:
    """`retry` and `output_format`, common fields some kinds refuse (they are dropped)."""
    if kind in ("loop", "loop_group") and "retry" in out:
        ctx.error(
            child_path(path, "retry"),
            f"{label}: 'retry' is not allowed on {kind} nodes (the loop manages its own "
            "iterations; use max_iterations)",
        )
        del out["retry"]
    if "output_format" in out:
        if kind == "loop_group":
            ctx.error(
                child_path(path, "output_format"),
                f"{label}: output_format is not supported on loop_group nodes (the group "
                "has no output of its own; declare it on a body node instead)",
            )
            del out["output_format"]
        else:
            check_output_schema(out["output_format"], child_path(path, "output_format"), ctx)


def _check_kind_block(
    raw: dict,
    out: dict,
    path: str,
    label: str,
    kind: str | None,
    ctx: RuleContext,
    group: str | None,
    visible: frozenset,
) -> None:
    """The block of the node's kind (its script, prompt, loop, ...), each by its own rules."""
    if kind == "bash" and isinstance(out.get("bash"), str):
        out["start_checks"] = checked_at_start(out["bash"])[0]
    if kind in ("bash", "prompt", "cancel"):
        what = {"bash": "a script", "prompt": "prompt text", "cancel": "a reason"}[kind]
        require_text(raw, kind, path, ctx, f"{label}: a {kind} node needs {what}")
    elif kind == "command":
        body = load_command(raw.get("command"), child_path(path, "command"), ctx)
        out["prompt"] = body
    elif kind == "script":
        check_script(raw, out, path, label, ctx)
    elif kind == "workflow":
        check_workflow_node(raw, out, path, label, ctx, group)
    elif kind == "approval":
        out["approval"] = check_approval(
            raw.get("approval"), child_path(path, "approval"), ctx, label
        )
    elif kind == "loop":
        out["loop"] = check_loop(raw, child_path(path, "loop"), label, ctx)
    elif kind == "loop_group":
        if group is not None:
            ctx.error(child_path(path, "loop_group"), nested_group_error(label, group))
        out["loop_group"] = _check_group(raw, child_path(path, "loop_group"), label, ctx, visible)


def _check_group(raw: dict, path: str, label: str, ctx: RuleContext, visible: frozenset) -> Any:
    block = raw.get("loop_group")
    if not isinstance(block, dict):
        if block is None:
            ctx.error(path, f"{label}: 'loop_group' needs a mapping (nodes, until, ...)")
        return block
    for key in block:
        key_path = child_path(path, key)
        if key == "until_field":
            ctx.error(
                key_path,
                f"{label}: until_field is not supported on loop_group (a body node can "
                "declare output_format and until_bash can read its field)",
            )
        elif key in ("prompt", "command"):
            ctx.error(
                key_path,
                f"{label}: a loop_group has no {short_repr(key)}; its body nodes do the work",
            )
        elif key not in GROUP_FIELDS:
            ctx.warn(key_path, f"{label}: unknown loop_group field {short_repr(key)} is ignored")
    out = drop_nulls({k: v for k, v in block.items() if k in GROUP_FIELDS})
    check_controls(block, path, label, ctx, "loop_group")
    check_gate_deadline(out, path, label, ctx, has_gate=block.get("interactive") is True)
    body = block.get("nodes")
    body_path = child_path(path, "nodes")
    if body is None:
        ctx.error(body_path, f"{label}: a loop_group needs a non-empty 'nodes' list (its body)")
    elif isinstance(body, list) and not body:
        ctx.error(body_path, f"{label}: the loop_group body must contain at least one node")
    elif isinstance(body, list):
        group_id = raw.get("id") if isinstance(raw.get("id"), str) else label
        out["nodes"] = _check_nodes(body, body_path, ctx, group=group_id, outer_ids=visible)
        if ctx.aliases:  # until / until_bash may read an included block's output
            nodes = out.pop("nodes")
            out = {**through_aliases(out, ctx.aliases), "nodes": nodes}
    return out
