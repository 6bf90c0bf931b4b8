"""Rules for `workflow:` nodes: another recipe started as a child run, or with `fan_out:`
as one child run per item of a list an upstream node produced.

The target is a name resolved when the node runs (a recipe may start one that another
step wrote), so it is not looked up here; only its form is checked.
"""

from __future__ import annotations

import json
from typing import Any

from recipes.formats.commands import CommandError, check_name
from recipes.formats.rule_context import (
    AGENT_ONLY_FIELDS,
    ID_PATTERN,
    RuleContext,
    is_blank,
    require_text,
)
from recipes.problems import child_path, short_repr
from runs.engine.shell_context import REFERENCE_RE

FAN_OUT_FIELDS = frozenset({"items", "max_parallel", "join", "as"})
JOINS = ("all_done", "all_success")


def check_workflow_node(
    raw: dict, out: dict, path: str, label: str, ctx: RuleContext, group: str | None
) -> None:
    """Check a workflow node and complete `out` (its cleaned mapping) in place."""
    if group is not None:
        ctx.error(
            child_path(path, "workflow"),
            f"{label}: a 'workflow' node cannot be in a loop_group body (loop_group "
            f"{short_repr(group)}): a child run is not repeated with the body; use "
            "'include:' to repeat another workflow's nodes",
        )
    _drop_step_fields(out, path, label, ctx)
    require_text(raw, "workflow", path, ctx, f"{label}: a workflow node needs a workflow name")
    target = raw.get("workflow")
    if isinstance(target, str) and not is_blank(target):
        try:
            check_name(target.strip(), "workflow")
        except CommandError as exc:
            ctx.error(child_path(path, "workflow"), f"{label}: {exc}")
    child_inputs = _check_child_start(raw, out, path, label, ctx)
    if "fan_out" in out:
        out["fan_out"] = _check_fan_out(raw["fan_out"], child_path(path, "fan_out"), label, ctx)
        item_input = (out["fan_out"] or {}).get("item_input")
        if isinstance(child_inputs, dict) and item_input in child_inputs:
            ctx.error(
                child_path(child_path(path, "fan_out"), "as"),
                f"{label}: fan_out.as {short_repr(item_input)} is also a key of 'with'",
            )


def _drop_step_fields(out: dict, path: str, label: str, ctx: RuleContext) -> None:
    """Fields of a step the child run's own nodes decide (warned about) and `retry`
    (refused), all dropped from `out`."""
    for key in (*AGENT_ONLY_FIELDS, "timeout"):
        if key in out:
            ctx.warn(
                child_path(path, key),
                f"{label}: field {short_repr(key)} has no effect on a workflow node (the "
                "child run's own nodes decide it)",
            )
            del out[key]
    if "retry" in out:
        ctx.error(
            child_path(path, "retry"),
            f"{label}: 'retry' is not allowed on a workflow node (a retry would leave the "
            "first child run behind); resume the run instead",
        )
        del out["retry"]


def _check_child_start(raw: dict, out: dict, path: str, label: str, ctx: RuleContext):
    """Where the child run works (the parent's folder) and what it is given: its message
    (`input`) or its inputs (`with`, kept in `out` as `child_inputs` and returned)."""
    isolation = raw.get("isolation")
    out.pop("isolation", None)
    if isolation not in (None, "inherit"):
        ctx.warn(
            child_path(path, "isolation"),
            f"{label}: isolation {short_repr(isolation)} is not used by Loop Console: child "
            "runs work in the parent run's working directory",
        )
    if raw.get("input") is not None and raw.get("with") is not None:
        ctx.error(
            child_path(path, "with"),
            f"{label}: give a child run either 'input' (its message) or 'with' (its "
            "inputs), not both",
        )
    child_inputs = out.pop("with", None)
    if child_inputs is not None:
        if isinstance(child_inputs, dict):
            out["child_inputs"] = child_inputs
        else:
            ctx.error(child_path(path, "with"), f"{label}: 'with' must be a mapping")
    return child_inputs


def _check_fan_out(block: Any, path: str, label: str, ctx: RuleContext) -> Any:
    if not isinstance(block, dict):
        ctx.error(path, f"{label}: fan_out needs a mapping (items, max_parallel, join)")
        return None
    for key in block:
        if key not in FAN_OUT_FIELDS:
            ctx.warn(child_path(path, key), f"{label}: unknown fan_out field {short_repr(key)}")
    out = {k: v for k, v in block.items() if k in FAN_OUT_FIELDS and v is not None}
    items = block.get("items")
    items_path = child_path(path, "items")
    if items is None:
        ctx.error(items_path, f"{label}: fan_out needs 'items' ($node.output or a list)")
    elif isinstance(items, list) or (isinstance(items, str) and not REFERENCE_RE.search(items)):
        literal = literal_items(items)
        if isinstance(literal, str):
            ctx.error(items_path, f"{label}: fan_out.items {literal}")
            out.pop("items", None)
        else:
            out["items"] = literal
    join = block.get("join")
    if join == "first_success":
        ctx.error(
            child_path(path, "join"),
            f"{label}: join 'first_success' is refused: a race would cancel the other "
            "children; use separate nodes and one node that picks the best result",
        )
        out.pop("join")
    elif join is not None and join not in JOINS:
        ctx.error(
            child_path(path, "join"),
            f"{label}: join {short_repr(join)} is not one of: all_done, all_success",
        )
        out.pop("join")
    name = out.pop("as", None)
    if name is not None:
        if isinstance(name, str) and ID_PATTERN.fullmatch(name):
            out["item_input"] = name
        else:
            ctx.error(child_path(path, "as"), f"{label}: fan_out.as must be an input name")
    return out


def literal_items(items: list | str) -> list | str:
    """A fan-out list written in the recipe (a YAML list, or a JSON list as text): the list,
    or why it is not one. Each item becomes a child's message, so it must be text, a number,
    a boolean or JSON (objects and lists arrive as their JSON text)."""
    if isinstance(items, str):
        try:
            items = json.loads(items)
        except ValueError:
            return (
                "must name an upstream output that is a JSON list ($node.output or "
                f"$node.output.field) or be a list, not {short_repr(items)}"
            )
        if not isinstance(items, list):
            return f"must be a list, not the JSON {type(items).__name__} {short_repr(items)}"
    for index, item in enumerate(items):
        if item is None:
            return f"item {index + 1} is empty (null); write the text the child should get"
    return items


def fan_out_without_workflow(raw: dict, path: str, label: str, ctx: RuleContext) -> None:
    if "fan_out" in raw and "workflow" not in raw and "include" not in raw:
        ctx.error(
            child_path(path, "fan_out"),
            f"{label}: fan_out belongs on a 'workflow:' node (one child run per item)",
        )
