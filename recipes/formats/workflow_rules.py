"""Structural and cross-field rules for ``kind: workflow`` recipes.

``check_workflow`` walks the raw document, records positioned errors and warnings
on a :class:`RuleContext`, and returns a cleaned copy (ignored fields dropped,
node kinds derived, command files loaded) for pydantic to type-check.  Rules stay
quiet about values of the wrong type: pydantic reports those.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recipes.formats.workflow import CommandError, find_cycles, resolve_command
from recipes.loader import LineMap, Problem, child_path, short_repr

KIND_KEYS = ("bash", "prompt", "command", "loop", "loop_group", "approval", "cancel")
# Node kinds other tools define that Loop Console does not run.
UNSUPPORTED_KIND_KEYS = tuple(
    "script workflow fan_out fan_in include parallel map for_each foreach sub_workflow "
    "subworkflow switch router http webhook python".split()
)
COMMON_NODE_FIELDS = frozenset(
    "id depends_on when trigger_rule provider model output_format idle_timeout timeout "
    "retry always_run".split()
)
# Fields other tools understand; Loop Console accepts them but does nothing with them.
FOREIGN_NODE_FIELDS = frozenset(
    "effort thinking agents output_type sandbox worktree mutates_checkout persist_session "
    "allowed_tools denied_tools hooks mcp skills context with returns fallback_model betas "
    "max_budget_usd system_prompt settings_sources max_turns env".split()
)
LOOP_DISCARDED_FIELDS = ("hooks", "mcp", "skills", "allowed_tools", "denied_tools", "context")
TOP_LEVEL_FIELDS = frozenset(
    {"name", "description", "interactive", "provider", "model", "providers", "inputs", "nodes"}
)
_CONTROL_FIELDS = (
    "until",
    "until_bash",
    "max_iterations",
    "fresh_context",
    "interactive",
    "gate_message",
    "signal_completes",
)
LOOP_FIELDS = frozenset({"prompt", "command", "until_field", *_CONTROL_FIELDS})
GROUP_FIELDS = frozenset({"nodes", *_CONTROL_FIELDS})
INPUT_FIELDS = frozenset({"type", "label", "description", "required", "default", "options"})
APPROVAL_FIELDS = frozenset({"message", "decisions", "capture_response"})

ID_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_KIND_LIST = ", ".join(KIND_KEYS)


@dataclass
class RuleContext:
    lines: LineMap
    commands_dirs: tuple[Path, ...] = ()
    workflow_interactive: bool = False
    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    def error(self, path: str, message: str) -> None:
        self.errors.append(self.lines.problem(path, _cap(message)))

    def warn(self, path: str, message: str) -> None:
        self.warnings.append(self.lines.problem(path, _cap(message)))

    @staticmethod
    def is_derived(path: str) -> bool:
        """Paths pydantic may complain about that the author never wrote."""
        return path.endswith("].kind") and not path.startswith("providers.")


def _cap(message: str, limit: int = 500) -> str:
    return message if len(message) <= limit else message[: limit - 3] + "..."


def _blank(value: Any) -> bool:
    return isinstance(value, str) and not value.strip()


def _require_text(raw: dict, key: str, path: str, ctx: RuleContext, missing: str) -> None:
    """Error when ``key`` is absent, null or blank (other types are pydantic's job)."""
    value = raw.get(key)
    if value is None:
        ctx.error(child_path(path, key), missing)
    elif _blank(value):
        ctx.error(child_path(path, key), "must not be empty")


def _drop_nulls(raw: dict, keep: tuple[str, ...] = ()) -> dict:
    return {k: v for k, v in raw.items() if v is not None or k in keep}


# ------------------------------------------------------------------------ top level


def check_workflow(data: dict, ctx: RuleContext) -> dict:
    for key in data:
        if key not in TOP_LEVEL_FIELDS:
            ctx.warn(child_path("", key), f"unknown top-level field {short_repr(key)} is ignored")
    cleaned = {k: v for k, v in data.items() if k in TOP_LEVEL_FIELDS}
    ctx.workflow_interactive = data.get("interactive") is True

    if data.get("name") is None:
        ctx.error("name", "a workflow needs a 'name'")
    elif _blank(data["name"]):
        ctx.error("name", "must not be empty")
    if cleaned.get("description") is None:
        cleaned["description"] = ""
    cleaned = _drop_nulls(cleaned, keep=("name", "nodes"))

    inputs = cleaned.get("inputs")
    if isinstance(inputs, dict):
        cleaned["inputs"] = {name: _check_input(name, spec, ctx) for name, spec in inputs.items()}

    nodes = data.get("nodes")
    if nodes is None:
        ctx.error("nodes", "a workflow needs a non-empty 'nodes' list")
    elif not isinstance(nodes, list):
        ctx.error("nodes", "must be a list of nodes")
    elif not nodes:
        ctx.error("nodes", "must contain at least one node")
    else:
        cleaned["nodes"] = _check_nodes(nodes, "nodes", ctx, group=None, outer_ids=frozenset())
    return cleaned


def _check_input(name: str, spec: Any, ctx: RuleContext) -> Any:
    path = child_path("inputs", name)
    if not ID_PATTERN.fullmatch(name):
        ctx.error(path, f"invalid input name {short_repr(name)}: use letters, digits, '_' or '-'")
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        return spec
    for key in spec:
        if key not in INPUT_FIELDS:
            ctx.warn(
                child_path(path, key),
                f"input {short_repr(name)}: unknown field {short_repr(key)} is ignored",
            )
    return _drop_nulls({k: v for k, v in spec.items() if k in INPUT_FIELDS}, keep=("default",))


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
    for index, raw in enumerate(items):
        node_path = child_path(path, index)
        if not isinstance(raw, dict):
            ctx.error(
                node_path, f"each node must be a mapping with an 'id' and one of: {_KIND_LIST}"
            )
            cleaned.append(raw)
            continue
        node_id = raw.get("id")
        label = f"node {short_repr(node_id)}" if isinstance(node_id, str) else f"node #{index + 1}"
        if node_id is None:
            ctx.error(node_path, f"{label} has no 'id'")
        elif isinstance(node_id, str):
            id_path = child_path(node_path, "id")
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
                node_paths[node_id] = node_path
        node = _check_node(raw, node_path, label, ctx, group, visible)
        cleaned.append(node)
        deps = raw.get("depends_on")
        if isinstance(deps, list):
            valid = _check_depends(deps, node_path, label, ctx, group, scope_ids, outer_ids)
            if isinstance(node_id, str) and node_paths.get(node_id) == node_path:
                edges[node_id] = valid
    _check_cycles(edges, node_paths, ctx)
    return cleaned


def _check_depends(
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


def _check_cycles(
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


def _node_kind(raw: dict, path: str, label: str, ctx: RuleContext, group: str | None) -> str | None:
    for key in UNSUPPORTED_KIND_KEYS:
        if key not in raw:
            continue
        if key == "workflow" and group is not None:
            ctx.error(
                child_path(path, key),
                f"{label}: a 'workflow' node cannot appear in a loop_group body "
                f"(loop_group {short_repr(group)}); sub-workflows are not supported by Loop Console",
            )
        else:
            ctx.error(
                child_path(path, key),
                f"{label}: field {short_repr(key)}: node kind {short_repr(key)} is not supported by Loop Console",
            )
    kinds = [key for key in KIND_KEYS if key in raw]
    unsupported = any(key in raw for key in UNSUPPORTED_KIND_KEYS)
    if len(kinds) == 1:
        return kinds[0]
    if not kinds and not unsupported:
        ctx.error(path, f"{label} has no kind: give it exactly one of {_KIND_LIST}")
    elif len(kinds) > 1:
        ctx.error(
            child_path(path, kinds[1]),
            f"{label} has several kinds ({', '.join(kinds)}); use exactly one of {_KIND_LIST}",
        )
    return None


def _check_node(
    raw: dict, path: str, label: str, ctx: RuleContext, group: str | None, visible: frozenset
) -> dict:
    kind = _node_kind(raw, path, label, ctx, group)
    is_loop = kind in ("loop", "loop_group")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        key_path = child_path(path, key)
        if key in COMMON_NODE_FIELDS or key in KIND_KEYS:
            out[key] = value
        elif key in UNSUPPORTED_KIND_KEYS:
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
    out = _drop_nulls(out, keep=("id", *KIND_KEYS))
    if kind is not None:
        out["kind"] = kind

    if is_loop and "retry" in out:
        ctx.error(
            child_path(path, "retry"),
            f"{label}: 'retry' is not allowed on {kind} nodes (the loop manages its own "
            "iterations; use max_iterations)",
        )
        del out["retry"]
    if "timeout" in out and kind != "bash":
        ctx.warn(child_path(path, "timeout"), f"{label}: 'timeout' only applies to bash nodes")
    if "output_format" in out:
        if kind == "loop_group":
            ctx.error(
                child_path(path, "output_format"),
                f"{label}: output_format is not supported on loop_group nodes (the group "
                "has no output of its own; declare it on a body node instead)",
            )
            del out["output_format"]
        else:
            _check_output_schema(out["output_format"], child_path(path, "output_format"), ctx)

    if kind in ("bash", "prompt", "cancel"):
        what = {"bash": "a script", "prompt": "prompt text", "cancel": "a reason"}[kind]
        _require_text(raw, kind, path, ctx, f"{label}: a {kind} node needs {what}")
    elif kind == "command":
        body = _load_command(raw.get("command"), child_path(path, "command"), ctx)
        out["prompt"] = body
    elif kind == "approval":
        out["approval"] = _check_approval(raw.get("approval"), child_path(path, "approval"), ctx)
    elif kind == "loop":
        out["loop"] = _check_loop(raw, child_path(path, "loop"), label, ctx)
    elif kind == "loop_group":
        out["loop_group"] = _check_group(raw, child_path(path, "loop_group"), label, ctx, visible)
    return out


def _check_output_schema(schema: Any, path: str, ctx: RuleContext) -> None:
    if not isinstance(schema, dict):
        return  # pydantic: must be a mapping
    from jsonschema import exceptions as js_exceptions
    from jsonschema import validators

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            validators.validator_for(schema).check_schema(schema)
    except js_exceptions.SchemaError as exc:
        where = path
        for part in exc.path:
            where = child_path(where, part)
        ctx.error(where, f"output_format is not a valid JSON Schema: {exc.message}")
    except Exception as exc:  # noqa: BLE001 - hostile schemas must not crash loading
        ctx.error(path, f"output_format is not a valid JSON Schema ({type(exc).__name__})")


def _check_approval(value: Any, path: str, ctx: RuleContext) -> Any:
    if value is None:
        ctx.error(path, "an approval node needs a message (approval: {message: ...})")
        return value
    if isinstance(value, str):
        if not value.strip():
            ctx.error(path, "must not be empty")
        return value
    if not isinstance(value, dict):
        return value
    for key in value:
        if key not in APPROVAL_FIELDS:
            ctx.warn(child_path(path, key), f"approval: unknown field {short_repr(key)} is ignored")
    _require_text(value, "message", path, ctx, "an approval needs a message")
    decisions = value.get("decisions")
    if isinstance(decisions, list):
        seen: set[str] = set()
        for j, decision in enumerate(decisions):
            ident = decision.get("id") if isinstance(decision, dict) else decision
            if isinstance(ident, str):
                if ident in seen:
                    ctx.error(
                        child_path(child_path(path, "decisions"), j),
                        f"duplicate decision {short_repr(ident)}",
                    )
                seen.add(ident)
    return _drop_nulls({k: v for k, v in value.items() if k in APPROVAL_FIELDS}, ("message",))


# ------------------------------------------------------------------- loop controls


def _check_controls(block: dict, path: str, label: str, ctx: RuleContext, what: str) -> None:
    """Rules shared by ``loop`` and ``loop_group``."""
    channels = ("until", "until_bash", "until_field") if what == "loop" else ("until", "until_bash")
    if all(block.get(name) is None for name in channels):
        names = " / ".join(channels)
        ctx.error(path, f"{label}: a {what} needs at least one completion condition ({names})")
    for name in (*channels, "gate_message"):
        if _blank(block.get(name)):
            ctx.error(child_path(path, name), "must not be empty")
    if block.get("max_iterations") is None:
        ctx.error(
            child_path(path, "max_iterations"),
            f"{label}: max_iterations is required (a positive integer)",
        )
    if block.get("interactive") is True:
        if block.get("gate_message") is None:
            ctx.error(
                child_path(path, "interactive"),
                f"{label}: an interactive {what} needs a gate_message",
            )
        if not ctx.workflow_interactive:
            ctx.warn(
                child_path(path, "interactive"),
                f"{label}: interactive {what}, but the workflow itself is not interactive; "
                "add 'interactive: true' at the top level or the gate will not pause correctly",
            )
    if block.get("signal_completes") is True and block.get("interactive") is not True:
        ctx.warn(
            child_path(path, "signal_completes"),
            f"{label}: signal_completes only matters for interactive {what}s and has no effect",
        )


def _check_loop(raw: dict, path: str, label: str, ctx: RuleContext) -> Any:
    block = raw.get("loop")
    if not isinstance(block, dict):
        if block is None:
            ctx.error(path, f"{label}: 'loop' needs a mapping (prompt, until, max_iterations, ...)")
        return block
    for key in block:
        if key not in LOOP_FIELDS:
            ctx.warn(
                child_path(path, key), f"{label}: unknown loop field {short_repr(key)} is ignored"
            )
    out = _drop_nulls({k: v for k, v in block.items() if k in LOOP_FIELDS})
    has_prompt = block.get("prompt") is not None
    has_command = block.get("command") is not None
    if has_prompt and has_command:
        ctx.error(
            child_path(path, "command"),
            f"{label}: a loop takes either 'prompt' or 'command', not both",
        )
    elif not has_prompt and not has_command:
        ctx.error(path, f"{label}: a loop needs exactly one of 'prompt' or 'command'")
    elif has_prompt and _blank(block["prompt"]):
        ctx.error(child_path(path, "prompt"), "must not be empty")
    elif has_command:
        body = _load_command(block["command"], child_path(path, "command"), ctx)
        out["prompt"] = body if body is not None else "(unresolved command)"
    if not has_prompt and not has_command:
        out["prompt"] = "(missing prompt)"
    _check_controls(block, path, label, ctx, "loop")
    _check_until_field(block.get("until_field"), raw.get("output_format"), path, label, ctx)
    return out


def _check_until_field(name: Any, schema: Any, path: str, label: str, ctx: RuleContext) -> None:
    if not isinstance(name, str) or not name.strip():
        return
    where = child_path(path, "until_field")
    prefix = f"{label}: until_field {short_repr(name)}"
    if not isinstance(schema, dict):
        ctx.error(where, f"{prefix} needs this node to declare an output_format")
        return
    properties = schema.get("properties")
    prop = properties.get(name) if isinstance(properties, dict) else None
    if not isinstance(properties, dict) or name not in properties:
        ctx.error(where, f"{prefix} is not a property in output_format.properties")
    required = schema.get("required")
    if not isinstance(required, list) or name not in required:
        ctx.error(
            where,
            f"{prefix} must be listed in output_format.required (an omitted field would "
            "never end the loop)",
        )
    if isinstance(prop, dict) and "type" in prop and prop["type"] not in ("boolean", ["boolean"]):
        ctx.error(
            where,
            f"{prefix} must have type boolean in output_format, not {short_repr(prop['type'])}",
        )


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
    out = _drop_nulls({k: v for k, v in block.items() if k in GROUP_FIELDS})
    _check_controls(block, path, label, ctx, "loop_group")
    body = block.get("nodes")
    body_path = child_path(path, "nodes")
    if body is None:
        ctx.error(body_path, f"{label}: a loop_group needs a non-empty 'nodes' list (its body)")
    elif isinstance(body, list) and not body:
        ctx.error(body_path, f"{label}: the loop_group body must contain at least one node")
    elif isinstance(body, list):
        group_id = raw.get("id") if isinstance(raw.get("id"), str) else label
        out["nodes"] = _check_nodes(body, body_path, ctx, group=group_id, outer_ids=visible)
    return out


# ---------------------------------------------------------------------- commands


def _load_command(name: Any, path: str, ctx: RuleContext) -> str | None:
    """Body of ``<dir>/<name>.md`` from the first commands dir that has it."""
    if not isinstance(name, str):
        if name is None:
            ctx.error(path, "a command name is required")
        return None
    if not name.strip():
        ctx.error(path, "must not be empty")
        return None
    try:
        return resolve_command(name, ctx.commands_dirs)
    except CommandError as exc:
        ctx.error(path, str(exc))
        return None
