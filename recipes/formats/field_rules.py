"""Rules for the parts of a workflow node: inputs, output schemas, approvals, loop controls
and command files.  Each reports on the :class:`RuleContext` and returns the cleaned part."""

from __future__ import annotations

import warnings
from typing import Any

from recipes.formats.commands import CommandError, resolve_command
from recipes.formats.rule_context import (
    APPROVAL_FIELDS,
    ID_PATTERN,
    INPUT_FIELDS,
    LOOP_FIELDS,
    RuleContext,
    drop_nulls,
    is_blank,
    require_text,
)
from recipes.formats.scoring import check_score, check_stop
from recipes.problems import child_path, short_repr
from runs.engine.deadlines import (
    escalation_names,
    escalation_problems,
    on_timeout_problem,
    timeout_decision_problem,
)
from runs.engine.durations import DurationError, parse_duration


def check_input(name: str, spec: Any, ctx: RuleContext) -> Any:
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
    return drop_nulls({k: v for k, v in spec.items() if k in INPUT_FIELDS}, keep=("default",))


def check_output_schema(schema: Any, path: str, ctx: RuleContext) -> None:
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


def check_approval(value: Any, path: str, ctx: RuleContext, label: str = "approval") -> Any:
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
    require_text(value, "message", path, ctx, "an approval needs a message")
    check_decisions(value, path, label, ctx, THENS["approval"])
    out = drop_nulls({k: v for k, v in value.items() if k in APPROVAL_FIELDS}, ("message",))
    check_gate_deadline(out, path, label, ctx, has_gate=True)
    return out


def check_gate_deadline(block: dict, path: str, label: str, ctx: RuleContext, has_gate: bool):
    """`gate_timeout` (a duration) and `on_timeout` (remind, reject or fail; never approve).
    A value refused here is dropped from `block`, so it is reported once, with its line."""
    timeout, action = block.get("gate_timeout"), block.get("on_timeout")
    if timeout is not None:
        try:
            parse_duration(timeout)
        except DurationError as exc:
            ctx.error(child_path(path, "gate_timeout"), f"{label}: gate_timeout {exc}")
            block.pop("gate_timeout", None)
        else:
            if not has_gate:
                ctx.warn(
                    child_path(path, "gate_timeout"),
                    f"{label}: gate_timeout only applies to a gate (an interactive loop); "
                    "it has no effect here",
                )
    if action is not None:
        if problem := on_timeout_problem(action):
            ctx.error(child_path(path, "on_timeout"), f"{label}: {problem}")
            block.pop("on_timeout", None)
        elif timeout is None:
            ctx.error(
                child_path(path, "on_timeout"),
                f"{label}: on_timeout needs a gate_timeout (how long the gate waits)",
            )
    check_escalation(block, path, label, ctx, timeout)
    decision = block.get("timeout_decision")
    declared = block.get("decisions")
    if problem := timeout_decision_problem(
        decision, declared, gate_timeout=timeout, on_timeout=action
    ):
        ctx.error(child_path(path, "timeout_decision"), f"{label}: {problem}")
        block.pop("timeout_decision", None)


def check_escalation(block: dict, path: str, label: str, ctx: RuleContext, timeout) -> None:
    """`escalate_to` (group or user names) and `escalate_after` (the second deadline), by
    the rules of runs.engine.deadlines; each refusal on its field's line, the field dropped."""
    problems = escalation_problems(timeout, block.get("escalate_to"), block.get("escalate_after"))
    for name, problem in problems:
        ctx.error(child_path(path, name), f"{label}: {problem}")
    for name, _problem in problems:
        block.pop(name, None)
    if block.get("escalate_to") is not None:
        block["escalate_to"] = list(escalation_names(block["escalate_to"]))


# What a declared decision may do (`then:`), by the gate that declares it.
THENS = {"approval": ("approve",), "loop": ("complete", "iterate", "fail")}


def check_decisions(
    block: dict, path: str, label: str, ctx: RuleContext, thens, *, is_gate: bool = True
) -> None:
    """A gate's `decisions:` (each `{id, label, text_required, then}`; ids unique, `then`
    one of `thens`) and `approvals:` (how many different people must approve)."""
    decisions = block.get("decisions")
    where = child_path(path, "decisions")
    if decisions is not None and not isinstance(decisions, list):
        ctx.error(where, f"{label}: decisions is a list ({{id, label}} each)")
    seen: set[str] = set()
    for j, decision in enumerate(decisions if isinstance(decisions, list) else []):
        ident = decision.get("id") if isinstance(decision, dict) else decision
        if isinstance(ident, str):
            if ident in seen:
                ctx.error(child_path(where, j), f"duplicate decision {short_repr(ident)}")
            seen.add(ident)
        then = decision.get("then") if isinstance(decision, dict) else None
        if then is not None and then not in thens:
            ctx.error(
                child_path(child_path(where, j), "then"),
                f"{label}: then: {short_repr(then)} is not one of {', '.join(thens)}",
            )
    approvals = block.get("approvals")
    if approvals is not None and (
        isinstance(approvals, bool) or not isinstance(approvals, int) or approvals < 1
    ):
        ctx.error(child_path(path, "approvals"), f"{label}: approvals is a whole number, 1 or more")
    if (decisions or approvals is not None) and not is_gate:
        ctx.error(
            where if decisions else child_path(path, "approvals"),
            f"{label}: decisions and approvals belong to a gate (interactive: true)",
        )


# ------------------------------------------------------------------- loop controls


def check_controls(block: dict, path: str, label: str, ctx: RuleContext, what: str) -> None:
    """Rules shared by ``loop`` and ``loop_group``."""
    channels = ("until", "until_bash", "until_field") if what == "loop" else ("until", "until_bash")
    if all(block.get(name) is None for name in channels) and block.get("stop") is None:
        names = " / ".join(channels) + (" or stop rules" if what == "loop" else "")
        ctx.error(path, f"{label}: a {what} needs at least one completion condition ({names})")
    for name in (*channels, "gate_message"):
        if is_blank(block.get(name)):
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
    is_gate = block.get("interactive") is True
    check_decisions(block, path, label, ctx, THENS["loop"], is_gate=is_gate)
    if block.get("signal_completes") is True and block.get("interactive") is not True:
        ctx.warn(
            child_path(path, "signal_completes"),
            f"{label}: signal_completes only matters for interactive {what}s and has no effect",
        )


def check_loop(raw: dict, path: str, label: str, ctx: RuleContext) -> Any:
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
    out = drop_nulls({k: v for k, v in block.items() if k in LOOP_FIELDS})
    has_prompt = block.get("prompt") is not None
    has_command = block.get("command") is not None
    if has_prompt and has_command:
        ctx.error(
            child_path(path, "command"),
            f"{label}: a loop takes either 'prompt' or 'command', not both",
        )
    elif not has_prompt and not has_command:
        ctx.error(path, f"{label}: a loop needs exactly one of 'prompt' or 'command'")
    elif has_prompt and is_blank(block["prompt"]):
        ctx.error(child_path(path, "prompt"), "must not be empty")
    elif has_command:
        body = load_command(block["command"], child_path(path, "command"), ctx)
        out["prompt"] = body if body is not None else "(unresolved command)"
    if not has_prompt and not has_command:
        out["prompt"] = "(missing prompt)"
    check_controls(block, path, label, ctx, "loop")
    check_gate_deadline(out, path, label, ctx, has_gate=block.get("interactive") is True)
    check_until_field(block.get("until_field"), raw.get("output_format"), path, label, ctx)
    _check_scoring(block, out, path, label, ctx, raw.get("output_format"))
    return out


def _check_scoring(block: dict, out: dict, path: str, label: str, ctx: RuleContext, schema):
    """`score:` and `stop:` (recipes.formats.scoring), cleaned into `out`."""
    for key in ("score", "stop"):
        out.pop(key, None)
    if block.get("score") is not None:
        score = check_score(block["score"], child_path(path, "score"), label, ctx, schema)
        if score is not None:
            out["score"] = score
    if block.get("stop") is not None:
        scored = block.get("score") is not None
        stop = check_stop(block["stop"], child_path(path, "stop"), label, ctx, scored)
        if stop is not None:
            out["stop"] = stop


def check_until_field(name: Any, schema: Any, path: str, label: str, ctx: RuleContext) -> None:
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


# ---------------------------------------------------------------------- commands


def load_command(name: Any, path: str, ctx: RuleContext) -> str | None:
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


def nested_group_error(label: str, group: str) -> str:
    """The design calls a loop_group inside a body "supported by construction, not hardened";
    this engine advances top-level groups only, so it refuses one rather than hang."""
    return (
        f"{label}: a loop_group cannot be inside another loop_group's body (loop_group "
        f"{short_repr(group)}): this console runs one level of loop_group; put the inner "
        "loop in a workflow of its own and call it with a 'workflow:' node outside the body, "
        "or make it a 'loop:' node"
    )
