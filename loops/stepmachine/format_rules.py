"""Rules for step-machine recipes: what an author got wrong, in their terms, on their line.

`check_planeai` walks the raw document, reports positioned errors and warnings on a
RuleContext and returns a cleaned copy for pydantic (`spec.py`) to type-check. Like the
workflow rules, a rule stays quiet about a value of the wrong type: pydantic says that.
"""

from __future__ import annotations

import re
from typing import Any

from loops.stepmachine import rendering
from loops.stepmachine.spec import (
    GATE_RESULTS,
    GITHUB_TRIGGERS,
    HANDOFF_STATUSES,
    ISOLATIONS,
    LOOP_STATUSES,
    MACHINE_NODE,
    STEP_KINDS,
    TRIGGER_KINDS,
)
from recipes.formats.field_rules import THENS, check_decisions, check_gate_deadline, check_input
from recipes.formats.rule_context import ID_PATTERN, RuleContext, is_blank
from recipes.formats.sandbox import check_sandbox_fields
from recipes.problems import child_path, short_repr

TOP_LEVEL = (
    "schema id name description trigger inputs knowledge tools roles policy steps network limits"
).split()
TRIGGER_FIELDS = ("kind", "events", "filters", "inputs", "cron", "every", "timezone")
# The trigger kinds each field is for (`kind` is for every one).
TRIGGER_FIELD_KINDS = {
    **dict.fromkeys(("events", "filters", "inputs"), GITHUB_TRIGGERS),
    **dict.fromkeys(("cron", "every", "timezone"), ("schedule",)),
}
CRON_FIELDS = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
KNOWLEDGE_FIELDS = ("files", "instructions")
TOOLS_FIELDS = ("required", "optional")
ROLE_FIELDS = ("provider", "mode", "isolation", "instructions", "session_reuse", "network")
POLICY_FIELDS = "max_rounds max_ticks max_sessions stale_after_ms merge_policy auto_approve".split()
STEP_FIELDS = (
    "id kind role prompt branch from on status next select event_kind gates gate_timeout on_timeout"
    " escalate_to escalate_after timeout_decision decisions approvals"
).split()
GATE_FIELDS = ("name", "command")
RECIPE_ID = r"[a-z0-9]+(?:[-_][a-z0-9]+)*"

# Per step kind: the fields it needs, and those it may have besides id, kind and next.
NEEDS = {
    "session.create": ("role", "prompt"),
    "session.prompt": ("role", "prompt", "select"),
    "handoff.wait": ("from", "on"),
    "gates.run": ("role", "gates", "on"),
    "human.wait": ("prompt",),
    "round.next": ("next",),
    "loop.status": ("status",),
    "loop.event": ("event_kind",),
}
MAY = {
    "session.create": ("branch",),
    "human.wait": (
        "gate_timeout",
        "on_timeout",
        "escalate_to",
        "escalate_after",
        "timeout_decision",
        "decisions",
        "approvals",
    ),
}
ON_KEYS = {"handoff.wait": HANDOFF_STATUSES, "gates.run": GATE_RESULTS}
TEMPLATE_FIELDS = ("prompt", "branch")


def check_planeai(data: dict, ctx: RuleContext) -> dict:
    for key in data:
        if key not in TOP_LEVEL:
            ctx.warn(child_path("", key), f"unknown top-level field {short_repr(key)} is ignored")
    cleaned = {k: v for k, v in data.items() if k in TOP_LEVEL and v is not None}
    cleaned["schema"] = data.get("schema", "").strip()

    recipe_id = data.get("id")
    if recipe_id is None:
        ctx.error("id", "a step-machine recipe needs an 'id' (its identity in the CLI and sync)")
    elif isinstance(recipe_id, str) and not re.fullmatch(RECIPE_ID, recipe_id):
        ctx.error(
            "id",
            f"invalid id {short_repr(recipe_id)}: use lowercase letters and digits, "
            "separated by '-' or '_'",
        )
    if data.get("name") is None and isinstance(recipe_id, str):
        cleaned["name"] = recipe_id
    if cleaned.get("description") is None:
        cleaned["description"] = ""

    _check_trigger(data, ctx)
    inputs = data.get("inputs")
    if isinstance(inputs, dict):
        cleaned["inputs"] = {name: check_input(name, spec, ctx) for name, spec in inputs.items()}
    _only(data.get("knowledge"), "knowledge", KNOWLEDGE_FIELDS, ctx)
    _check_knowledge_files(data.get("knowledge"), ctx)
    _only(data.get("tools"), "tools", TOOLS_FIELDS, ctx)
    _check_policy(data.get("policy"), ctx)
    check_sandbox_fields(data, "", ctx, cleaned)
    roles = _check_roles(data.get("roles"), ctx)
    steps = data.get("steps")
    if steps is None:
        ctx.error("steps", "a step-machine recipe needs a non-empty 'steps' list")
    elif not isinstance(steps, list):
        ctx.error("steps", "must be a list of steps")
    elif not steps:
        ctx.error("steps", "must contain at least one step")
    else:
        cleaned["steps"] = _check_steps(steps, roles, ctx)
    return cleaned


def _only(block: Any, path: str, allowed: tuple, ctx: RuleContext) -> None:
    if isinstance(block, dict):
        for key in block:
            if key not in allowed:
                ctx.warn(
                    child_path(path, key),
                    f"{path}: unknown field {short_repr(key)} is ignored",
                )


def _check_trigger(data: dict, ctx: RuleContext) -> None:
    """The trigger's kind, and the fields that kind takes: a GitHub trigger's events,
    filters and inputs (JSON pointers into a delivery's body), a schedule's cron or
    interval and time zone."""
    trigger = data.get("trigger")
    _only(trigger, "trigger", TRIGGER_FIELDS, ctx)
    if not isinstance(trigger, dict):
        return
    kind = trigger.get("kind", "manual")
    if not isinstance(kind, str):
        return  # pydantic says what is wrong with its type
    if kind not in TRIGGER_KINDS:
        ctx.error(
            "trigger.kind",
            f"unknown trigger kind {short_repr(kind)}; expected one of " + ", ".join(TRIGGER_KINDS),
        )
        return
    for name, kinds in TRIGGER_FIELD_KINDS.items():
        if name in trigger and kind not in kinds:
            ctx.error(
                child_path("trigger", name),
                f"trigger: a {kind} trigger takes no '{name}' (only "
                + " or ".join(kinds)
                + " triggers do)",
            )
    if kind == "schedule":
        _check_schedule(trigger, ctx)
    elif kind in GITHUB_TRIGGERS:
        _check_pointers(trigger, ctx)
        _check_trigger_inputs(trigger.get("inputs"), data, ctx)


def _check_schedule(trigger: dict, ctx: RuleContext) -> None:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if "cron" in trigger and "every" in trigger:
        ctx.error("trigger.every", "trigger: give 'cron' or 'every', not both")
    cron = trigger.get("cron")
    if isinstance(cron, str) and (problem := _cron_problem(cron)):
        ctx.error("trigger.cron", f"trigger.cron: {problem}")
    zone = trigger.get("timezone")
    if isinstance(zone, str):
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            ctx.error(
                "trigger.timezone",
                f"trigger: unknown time zone {short_repr(zone)} (e.g. Europe/Paris, UTC)",
            )


def _cron_problem(expression: str) -> str:
    """Why `expression` is not five cron fields Celery beat reads ("" when it is)."""
    from celery.schedules import crontab

    fields = expression.split()
    if len(fields) != len(CRON_FIELDS):
        return (
            f"a cron expression has five fields (minute hour day-of-month month "
            f"day-of-week); {short_repr(expression)} has {len(fields)}"
        )
    try:
        crontab(**dict(zip(CRON_FIELDS, fields, strict=True)))
    except (ValueError, TypeError) as exc:
        return f"not a cron expression: {exc}"
    return ""


def _check_pointers(trigger: dict, ctx: RuleContext) -> None:
    """Filters' keys and inputs' values are JSON pointers (RFC 6901) from the body's top."""
    filters, inputs = trigger.get("filters"), trigger.get("inputs")
    found = []
    if isinstance(filters, dict):
        found += [(child_path("trigger.filters", p), p) for p in filters]
    if isinstance(inputs, dict):
        found += [(child_path("trigger.inputs", n), p) for n, p in inputs.items()]
    for path, pointer in found:
        if isinstance(pointer, str) and (problem := pointer_problem(pointer)):
            ctx.error(path, f"trigger: {problem}")


def pointer_problem(pointer: str) -> str:
    """Why `pointer` is not a JSON pointer into a body ("" when it is)."""
    if not pointer.startswith("/"):
        return (
            f"{short_repr(pointer)} is not a JSON pointer: write it from the body's top, "
            f"e.g. '/{pointer.lstrip('#')}'"
        )
    if re.search(r"~(?![01])", pointer):
        return f"{short_repr(pointer)}: '~' is written '~0' and '/' inside a name '~1'"
    return ""


def _check_trigger_inputs(mapping: Any, data: dict, ctx: RuleContext) -> None:
    """Inputs read from a delivery are declared inputs, and none the recipe runs as a whole
    command: a value from outside never becomes one."""
    if not isinstance(mapping, dict):
        return
    declared = data.get("inputs") if isinstance(data.get("inputs"), dict) else {}
    commands = _command_inputs(data.get("steps"))
    for name in mapping:
        path = child_path("trigger.inputs", name)
        if name not in declared:
            names = ", ".join(sorted(map(str, declared))) or "none"
            ctx.error(
                path, f"trigger: {short_repr(name)} is not a declared input (inputs: {names})"
            )
        elif name in commands:
            ctx.error(
                path,
                f"trigger: step {commands[name]} runs the input {short_repr(name)} as a command; "
                "a value from a delivery never becomes a command",
            )


def _command_inputs(steps: Any) -> dict[str, str]:
    """Inputs a gates.run runs as a whole command, read from the raw steps: {input: step}."""
    found: dict[str, str] = {}
    for step in steps if isinstance(steps, list) else []:
        gates = step.get("gates") if isinstance(step, dict) else None
        for gate in gates if isinstance(gates, list) else []:
            command = gate.get("command") if isinstance(gate, dict) else None
            if isinstance(command, str) and rendering.whole_value(command):
                for name in rendering.command_sources(command)[0]:
                    found.setdefault(name, str(step.get("id")))
    return found


def _check_knowledge_files(block: Any, ctx: RuleContext) -> None:
    if not isinstance(block, dict) or not isinstance(block.get("files"), list):
        return
    for index, name in enumerate(block["files"]):
        if not isinstance(name, str):
            continue
        parts = name.replace("\\", "/").split("/")
        if name.startswith(("/", "~")) or ".." in parts:
            ctx.error(
                child_path("knowledge.files", index),
                f"{short_repr(name)}: knowledge files are paths inside the working tree "
                "(relative, without '..')",
            )


def _check_policy(block: Any, ctx: RuleContext) -> None:
    _only(block, "policy", POLICY_FIELDS, ctx)
    if isinstance(block, dict) and block.get("merge_policy") not in (None, "human"):
        ctx.error(
            "policy.merge_policy",
            f"merge_policy {short_repr(block['merge_policy'])} is not supported: only "
            "'human' (a person merges; nothing merges on its own)",
        )


def _check_roles(block: Any, ctx: RuleContext) -> set[str]:
    if not isinstance(block, dict):
        return set()
    for role_id, role in block.items():
        path = child_path("roles", role_id)
        if not ID_PATTERN.fullmatch(str(role_id)):
            ctx.error(path, f"invalid role id {short_repr(role_id)}: use letters, digits, '_', '-'")
        elif role_id == MACHINE_NODE:
            ctx.error(
                path, f"'{MACHINE_NODE}' is the name of the run's step runner; rename the role"
            )
        if not isinstance(role, dict):
            if role is None:
                ctx.error(path, f"role {short_repr(role_id)} needs a mapping with at least 'mode'")
            continue
        _only(role, path, ROLE_FIELDS, ctx)
        if "network" in role:
            check_sandbox_fields({"network": role["network"]}, path, ctx, role)
        if role.get("mode") is None:
            ctx.error(
                child_path(path, "mode"),
                f"role {short_repr(role_id)} needs a mode (write, review, readonly, or your own)",
            )
        isolation = role.get("isolation")
        if isinstance(isolation, str) and isolation not in ISOLATIONS:
            ctx.error(
                child_path(path, "isolation"),
                f"unknown isolation {short_repr(isolation)}; expected one of "
                + ", ".join(ISOLATIONS),
            )
        _check_role_provider(role_id, role, path, ctx)
        if role.get("mode") == "write" and isolation == "readonly":
            ctx.warn(
                child_path(path, "isolation"),
                f"role {short_repr(role_id)} has mode write but isolation readonly: it cannot "
                "write anything",
            )
    return {str(role_id) for role_id in block}


def _check_role_provider(role_id, role: dict, path: str, ctx: RuleContext) -> None:
    """A role whose provider cannot answer here is refused now, not found out by a run
    that could never take its first turn."""
    name = role.get("provider", "default")
    if ctx.provider_check is None or not isinstance(name, str):
        return
    problem = ctx.provider_check(None if name == "default" else name)
    if problem is None:
        return
    label = f"role {short_repr(role_id)}"
    where = child_path(path, "provider") if "provider" in role else path
    if name == "default":
        ctx.error(
            where,
            f"{label} uses the default provider, but {problem}: name one (`provider: demo` is "
            "the built-in demo agent) or mark a provider as the default in the admin (Provider configs)",
        )
    else:
        ctx.error(
            where,
            f"{label}: {problem}: add it in the admin (Provider configs) or name another "
            "(`provider: demo` is the built-in demo agent); a step-machine recipe declares no "
            "providers of its own",
        )


def _check_steps(items: list, roles: set[str], ctx: RuleContext) -> list:
    ids = {s["id"] for s in items if isinstance(s, dict) and isinstance(s.get("id"), str)}
    first_line: dict[str, int | None] = {}
    cleaned = []
    for index, raw in enumerate(items):
        path = child_path("steps", index)
        if not isinstance(raw, dict):
            ctx.error(path, "each step must be a mapping with an 'id' and a 'kind'")
            cleaned.append(raw)
            continue
        step_id = raw.get("id")
        label = f"step {short_repr(step_id)}" if isinstance(step_id, str) else f"step #{index + 1}"
        if step_id is None:
            ctx.error(path, f"{label} has no 'id'")
        elif isinstance(step_id, str):
            if step_id in first_line:
                ctx.error(
                    child_path(path, "id"),
                    f"duplicate step id {short_repr(step_id)} (first defined on line "
                    f"{first_line[step_id]})",
                )
            else:
                first_line[step_id] = ctx.lines.line(child_path(path, "id"))
        cleaned.append(_check_step(raw, path, label, ids, roles, ctx))
    return cleaned


def _check_step(raw, path, label, ids, roles, ctx: RuleContext) -> dict:
    kind = raw.get("kind")
    for key in raw:
        if key not in STEP_FIELDS:
            ctx.warn(child_path(path, key), f"{label}: unknown field {short_repr(key)} is ignored")
    if kind is None:
        ctx.error(path, f"{label} has no 'kind' (one of {', '.join(STEP_KINDS)})")
        return dict(raw)
    if not isinstance(kind, str) or kind not in STEP_KINDS:
        ctx.error(
            child_path(path, "kind"),
            f"{label}: unknown step kind {short_repr(kind)}; expected one of "
            + ", ".join(STEP_KINDS),
        )
        return dict(raw)
    needs, may = NEEDS[kind], MAY.get(kind, ())
    for name in needs:
        value = raw.get(name)
        if value is None:
            ctx.error(path, f"{label}: a {kind} step needs '{name}'")
        elif is_blank(value) or value in ([], {}):
            ctx.error(child_path(path, name), "must not be empty")
    for name in STEP_FIELDS:
        if name in raw and name not in (*needs, *may, "id", "kind", "next"):
            ctx.warn(child_path(path, name), f"{label}: '{name}' has no effect on a {kind} step")
    for name in ("role", "from"):
        role = raw.get(name)
        if isinstance(role, str) and role not in roles:
            declared = ", ".join(sorted(roles)) or "none"
            ctx.error(
                child_path(path, name),
                f"{label}: {name} {short_repr(role)} is not a declared role (roles: {declared})",
            )
    _check_targets(raw, path, label, kind, ids, ctx)
    if kind == "loop.status" and isinstance(raw.get("status"), str):
        if raw["status"] not in LOOP_STATUSES:
            ctx.error(
                child_path(path, "status"),
                f"{label}: unknown status {short_repr(raw['status'])}; expected one of "
                + ", ".join(LOOP_STATUSES),
            )
    if kind == "session.prompt" and isinstance(raw.get("select"), str):
        if raw["select"] != "latest":
            ctx.error(
                child_path(path, "select"),
                f"{label}: select {short_repr(raw['select'])} is not supported; use 'latest'",
            )
    for name in TEMPLATE_FIELDS:
        if isinstance(raw.get(name), str):
            _template(raw[name], child_path(path, name), label, ctx)
    out = {k: v for k, v in raw.items() if k in STEP_FIELDS and v is not None}
    if kind == "human.wait":
        check_decisions(out, path, label, ctx, THENS["loop"])
        check_gate_deadline(out, path, label, ctx, has_gate=True)
    if kind == "gates.run":
        out["gates"] = _check_gates(raw.get("gates"), child_path(path, "gates"), label, ctx)
    # Fields that do not apply to this kind are ignored (warned above), not type-checked.
    return {k: v for k, v in out.items() if k in (*needs, *may, "id", "kind", "next")}


def _check_targets(raw, path, label, kind, ids, ctx: RuleContext) -> None:
    target = raw.get("next")
    if isinstance(target, str) and target not in ids:
        ctx.error(
            child_path(path, "next"), f"{label}: next names unknown step {short_repr(target)}"
        )
    routes = raw.get("on")
    if not isinstance(routes, dict):
        return
    legal = ON_KEYS.get(kind)
    for key, target in routes.items():
        where = child_path(child_path(path, "on"), key)
        if legal is not None and key not in legal:
            ctx.error(
                where,
                f"{label}: {short_repr(key)} is not a result of a {kind} step; use "
                + ", ".join(legal),
            )
        if isinstance(target, str) and target not in ids:
            ctx.error(where, f"{label}: on.{key} names unknown step {short_repr(target)}")


def _check_gates(gates: Any, path: str, label: str, ctx: RuleContext) -> Any:
    if not isinstance(gates, list):
        return gates
    out = []
    for index, gate in enumerate(gates):
        gate_path = child_path(path, index)
        if not isinstance(gate, dict):
            out.append(gate)
            continue
        _only(gate, gate_path, GATE_FIELDS, ctx)
        for name in GATE_FIELDS:
            if gate.get(name) is None:
                ctx.error(gate_path, f"{label}: each gate needs a '{name}'")
        command = gate.get("command")
        if isinstance(command, str):
            command_path = child_path(gate_path, "command")
            if _template(command, command_path, label, ctx):
                _command_rules(command, command_path, label, ctx)
        out.append({k: v for k, v in gate.items() if k in GATE_FIELDS})
    return out


def _template(source: str, path: str, label: str, ctx: RuleContext) -> bool:
    """Template syntax problems on the template's own line in the file; True when clean."""
    problems = rendering.syntax_problems(source)
    for problem in problems:
        _at_line(source, path, problem.line, f"{label}: {problem.message}", ctx)
    return not problems


def _at_line(
    source: str, path: str, line: int, message: str, ctx: RuleContext, *, warning: bool = False
) -> None:
    from dataclasses import replace

    found = ctx.lines.problem(path, message[:500])
    if found.line is not None and "\n" in source.rstrip("\n"):
        found = replace(found, line=found.line + line)  # a block scalar starts one line below
    (ctx.warnings if warning else ctx.errors).append(found)


def _command_rules(command: str, path: str, label: str, ctx: RuleContext) -> None:
    errors, warnings = rendering.shell_check(command)
    for line, explanation in errors:
        _at_line(command, path, line, f"{label}, line {line} of the command: {explanation}", ctx)
    for line, explanation in warnings:
        message = f"{label}, line {line} of the command: {explanation}"
        _at_line(command, path, line, message, ctx, warning=True)
    if rendering.whole_value(command):
        _, others = rendering.command_sources(command)
        foreign = sorted(others - {"recipe", "loop_run"})
        if foreign:
            ctx.error(
                path,
                f"{label}: a gate command that is one value may come from inputs, never from "
                f"{', '.join(foreign)} (what agents and runs produce never becomes a command)",
            )
