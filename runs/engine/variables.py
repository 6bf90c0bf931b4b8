"""Variable substitution for prompts, bash scripts and ``until_bash`` checks.

Recognised references (everything else, e.g. ``$HOME``, ``$1``, ``$(cmd)``,
``${x}``, is passed through verbatim so shell scripts keep working):

* ``$ARGUMENTS`` / ``$USER_MESSAGE``, ``$ARTIFACTS_DIR``, ``$BASE_BRANCH``,
  ``$DOCS_DIR``, ``$WORKFLOW_ID``, ``$LOOP_USER_INPUT``, ``$LOOP_PREV_OUTPUT``
* ``$INPUTS.name`` (only names present in ``VarContext.inputs``)
* ``$nodeId.output`` and ``$nodeId.output.field`` (only ids in ``known_nodes``)
* ``$LOOP_PREV.nodeId.output`` and ``$LOOP_PREV.nodeId.output.field``

Scripts go through ``substitute_shell``: values travel in the environment
(``LOOP_V_1``, ...) and each reference becomes a reference to its variable, written for
its shell context (``runs.engine.shell_context``): bare -> ``"${LOOP_V_1}"`` (one word),
inside double quotes or an unquoted heredoc -> ``${LOOP_V_1}``. Contexts where bash would
run a value as code (arithmetic, subscripts, eval) are refused. Recipes are validated the
same way at load; doing it at run time covers recipe versions saved before that check.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from runs.engine.shell_checks import INTEGER, describe_source, waived
from runs.engine.shell_context import SAFE, Context, explain, plan

__all__ = [
    "NodeOutput",
    "input_env_name",
    "VarContext",
    "VariableError",
    "render_value",
    "resolve_field",
    "resolve_output",
    "substitute",
    "substitute_shell",
]


@dataclass(frozen=True)
class NodeOutput:
    text: str
    structured: dict | list | None = None
    schema: dict | None = None
    # A gate's node: its structured decision ({decision, text, by, via}), read by field.
    decided: dict | None = None


# Where a node's state keeps its gate's decision (runs.decisions.decided_state).
DECIDED = "decided"


@dataclass
class VarContext:
    user_message: str = ""
    artifacts_dir: str = ""
    base_branch: str = ""
    docs_dir: str = "docs/"
    workflow_id: str = ""
    inputs: dict = field(default_factory=dict)
    node_outputs: dict[str, NodeOutput] = field(default_factory=dict)
    known_nodes: frozenset[str] = frozenset()
    loop_user_input: str = ""
    loop_prev_output: str = ""
    loop_prev: dict[str, NodeOutput] | None = None


class VariableError(Exception):
    """A recognised reference that cannot be resolved (bad field access)."""


_NODE_ID = r"[A-Za-z0-9_-]+"
_FIELD = r"[A-Za-z_][A-Za-z0-9_]*"
# A reference must not be followed by an identifier character ($USER_MESSAGEX).
_END = r"(?![A-Za-z0-9_])"

_LOOP_PREV_RE = re.compile(rf"\$LOOP_PREV\.({_NODE_ID})\.output(?:\.({_FIELD}))?{_END}")
_INPUT_RE = re.compile(rf"\$INPUTS\.({_FIELD}){_END}")
_NODE_RE = re.compile(rf"\$({_NODE_ID})\.output(?:\.({_FIELD}))?{_END}")
_NAME_RE = re.compile(
    r"\$(ARGUMENTS|USER_MESSAGE|ARTIFACTS_DIR|BASE_BRANCH|DOCS_DIR|WORKFLOW_ID"
    rf"|LOOP_USER_INPUT|LOOP_PREV_OUTPUT){_END}"
)


def input_env_name(name: str) -> str:
    """`base-branch` -> `INPUTS_BASE_BRANCH`: how an input reaches bash and scripts."""
    return "INPUTS_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def render_value(value: object) -> str:
    """Render a JSON value as text: strings as-is, booleans lower-case, null empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return _dumps(value)


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def resolve_output(out: NodeOutput | None) -> str:
    """Whole-output text of a node (JSON text for a structured producer)."""
    if out is None:
        return ""
    if out.structured is not None:
        return _dumps(out.structured)
    return out.text


def resolve_field(out: NodeOutput | None, node_id: str, field_name: str, *, ref: str) -> str:
    """Strict ``.field`` access on a node output; ``ref`` names the reference in errors."""
    if out is None:
        return ""
    if out.decided and field_name in out.decided:
        return render_value(out.decided[field_name])
    schema = out.schema if isinstance(out.schema, dict) else None
    props = schema.get("properties") if schema else None
    if isinstance(props, dict) and field_name not in props:
        raise VariableError(
            f"{ref}: field '{field_name}' is not in {node_id}'s output_format"
            f" (declared: {', '.join(props) or 'none'})"
        )
    payload = out.structured
    if payload is None:
        try:
            payload = json.loads(out.text)
        except (ValueError, TypeError):
            raise VariableError(
                f"{ref}: {node_id}'s output is not JSON, so field '{field_name}'"
                " cannot be read (declare output_format on the producer)"
            ) from None
    if not isinstance(payload, dict):
        raise VariableError(
            f"{ref}: {node_id}'s output is a JSON {type(payload).__name__}, not an object,"
            f" so field '{field_name}' cannot be read"
        )
    return render_value(payload.get(field_name))


def _match_at(template: str, pos: int, ctx: VarContext) -> tuple[int, str] | None:
    """Try every reference form at ``pos`` (a ``$``); return (end, value) or None."""
    m = _LOOP_PREV_RE.match(template, pos)
    if m and m.group(1) in ctx.known_nodes:
        node_id, fld = m.group(1), m.group(2)
        if not ctx.loop_prev:
            return m.end(), ""
        out = ctx.loop_prev.get(node_id)
        if fld is None:
            return m.end(), resolve_output(out)
        return m.end(), resolve_field(out, node_id, fld, ref=m.group(0))

    m = _INPUT_RE.match(template, pos)
    if m and m.group(1) in ctx.inputs:
        return m.end(), render_value(ctx.inputs[m.group(1)])

    m = _NODE_RE.match(template, pos)
    if m and m.group(1) in ctx.known_nodes:
        node_id, fld = m.group(1), m.group(2)
        out = ctx.node_outputs.get(node_id)
        if fld is None:
            return m.end(), resolve_output(out)
        return m.end(), resolve_field(out, node_id, fld, ref=m.group(0))

    m = _NAME_RE.match(template, pos)
    if m:
        value = {
            "ARGUMENTS": ctx.user_message,
            "USER_MESSAGE": ctx.user_message,
            "ARTIFACTS_DIR": ctx.artifacts_dir,
            "BASE_BRANCH": ctx.base_branch,
            "DOCS_DIR": ctx.docs_dir,
            "WORKFLOW_ID": ctx.workflow_id,
            "LOOP_USER_INPUT": ctx.loop_user_input,
            "LOOP_PREV_OUTPUT": ctx.loop_prev_output,
        }[m.group(1)]
        return m.end(), value
    return None


def substitute(template: str, ctx: VarContext) -> str:
    """Replace every recognised reference in ``template``.

    Substitution is single-pass: text coming from a value is never re-scanned,
    so a value containing ``$USER_MESSAGE`` stays literal.
    """
    parts: list[str] = []
    pos = 0
    while True:
        dollar = template.find("$", pos)
        if dollar < 0:
            parts.append(template[pos:])
            break
        parts.append(template[pos:dollar])
        hit = _match_at(template, dollar, ctx)
        if hit is None:
            parts.append("$")
            pos = dollar + 1
            continue
        end, value = hit
        parts.append(value)
        pos = end
    return "".join(parts)


def _references(template: str, ctx: VarContext) -> list[tuple[int, int, str]]:
    found = []
    pos = 0
    while (dollar := template.find("$", pos)) >= 0:
        hit = _match_at(template, dollar, ctx)
        if hit is None:
            pos = dollar + 1
            continue
        found.append((dollar, hit[0], hit[1]))
        pos = hit[0]
    return found


# Linux passes at most 128 KiB in one environment string (MAX_ARG_STRLEN, "NAME=value"
# included): a longer value would stop the process from starting at all.
ENV_VALUE_LIMIT = 128 * 1024 - 64


def _check_env_size(template: str, start: int, end: int, value: str) -> None:
    if len(value) * 4 <= ENV_VALUE_LIMIT:
        return
    size = len(value.encode("utf-8", "replace"))
    if size <= ENV_VALUE_LIMIT:
        return
    line = template.count("\n", 0, start) + 1
    raise VariableError(
        f"line {line}: {template[start:end]} is {size:,} bytes, more than one environment "
        f"variable can carry ({ENV_VALUE_LIMIT:,} bytes on Linux), so the script could not "
        "start: have the step that makes it write it to a file (in $ARTIFACTS_DIR) and "
        "read the file here"
    )


def _check_integer(check: dict, ctx: VarContext) -> None:
    ref, line = check["ref"], check["line"]
    value = substitute(ref, ctx)
    if INTEGER.fullmatch(value):
        return
    shown = value if len(value) <= 60 else value[:57] + "..."
    via = f" through {check['via']}" if check.get("via") else ""
    raise VariableError(
        f"line {line}: {ref} ({describe_source(ref)}) is {shown!r}, not an integer; it "
        f"reaches {check['place']}{via} there, where bash would run it as code, so the step "
        "did not start (only an integer is accepted there)"
    )


def substitute_shell(
    template: str, ctx: VarContext, checks: list[dict] | None = None
) -> tuple[str, dict[str, str]]:
    """A bash script and the environment that carries its values.

    No value ever becomes script text. Environment strings cannot hold NUL, and neither
    can bash variables, so NUL bytes are dropped from values. A reference, or any other
    spelling of a value-carrying variable, in a place where bash would run it as code is
    a VariableError naming the line; so is a value too long for the environment. `checks`
    (runs.engine.shell_checks, made at load) are places allowed only for an integer: each
    value is checked first, and one that is not fails here, before anything runs.
    """
    checks = checks or []
    for check in checks:
        _check_integer(check, ctx)
    refs = _references(template, ctx)
    contexts, findings = plan(template, [(start, end) for start, end, _ in refs])
    problems = [
        (line, explain(template[start:end], context))
        for (start, end, _), context in zip(refs, contexts, strict=True)
        if context not in SAFE
        and not waived(checks, line := template.count("\n", 0, start) + 1, template[start:end])
    ] + [(f.line, f.explanation) for f in findings if not waived(checks, f.line, f.text)]
    if problems:
        line, explanation = min(problems)
        raise VariableError(f"line {line}: {explanation}")
    parts: list[str] = []
    env: dict[str, str] = {}
    pos = 0
    for number, ((start, end, value), context) in enumerate(
        zip(refs, contexts, strict=True), start=1
    ):
        parts.append(template[pos:start])
        pos = end
        if context is Context.COMMENT:
            parts.append(template[start:end])
            continue
        name = f"LOOP_V_{number}"
        env[name] = value.replace("\0", "")
        _check_env_size(template, start, end, env[name])
        parts.append(f"${{{name}}}" if context is not Context.BARE else f'"${{{name}}}"')
    parts.append(template[pos:])
    return "".join(parts), env
