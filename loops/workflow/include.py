"""`include:` — another workflow's nodes inlined at load time, with its inputs (`with:`).

Including `review-block` as `id: review` gives its nodes ids `review__<id>`, rewires their
`depends_on` and `$node.output` references, attaches the include's `depends_on`, `when` and
`trigger_rule` to the block's entry nodes, and hands the block's inputs to its own nodes as
bindings (`$INPUTS.<name>`, `INPUTS_<NAME>`): a value is never spliced into a script.
In the including workflow `depends_on: [review]` waits for every last node of the block and
`$review.output` is the block's `returns:` node (else its first last node).

The included file is checked in its own terms (its lines, its commands and scripts
folders); its problems are reported at the include node, naming the file and its line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recipes.formats import snapshot
from recipes.formats.commands import CommandError, check_name
from recipes.formats.resources import folders_text
from recipes.formats.rule_context import ID_PATTERN, RuleContext
from recipes.problems import Problem, child_path, short_repr

MAX_INCLUDE_DEPTH = 3
INCLUDE_FIELDS = frozenset({"id", "include", "with", "depends_on", "when", "trigger_rule"})
# Options that only make sense for a run of its own (`workflow:`): errors on an include.
LAUNCH_ONLY = ("isolation", "fan_out", "input", "mutates_checkout")
AGENT_KINDS = ("prompt", "command", "loop", "loop_group")
# Keys whose strings are never references to rename (schemas, names, paths).
_PLAIN_KEYS = frozenset(
    {"id", "kind", "depends_on", "provider", "model", "runtime", "script_path", "output_format"}
)
_INPUT_REF = re.compile(r"\$INPUTS\.([A-Za-z_][A-Za-z0-9_-]*)(?![A-Za-z0-9_])")
_OUTPUT_REF = re.compile(r"\$(LOOP_PREV\.)?([A-Za-z0-9_-]+)\.output(?![A-Za-z0-9_])")


@dataclass
class Expansion:
    nodes: list[dict]
    sinks: list[str]
    primary: str
    providers: dict = field(default_factory=dict)


def expand_include(
    raw: dict, path: str, label: str, ctx: RuleContext, outer_ids
) -> Expansion | None:
    """The block's nodes, namespaced, or None when the include cannot be expanded."""
    inc_id = raw.get("id")
    _check_fields(raw, path, label, ctx)
    name = raw.get("include")
    where = child_path(path, "include")
    if not isinstance(name, str) or not name.strip():
        ctx.error(where, f"{label}: 'include' needs a workflow name")
        return None
    name = name.strip()
    try:
        check_name(name, "workflow")
    except CommandError as exc:
        ctx.error(where, f"{label}: {exc}")
        return None
    if not isinstance(inc_id, str) or not ID_PATTERN.fullmatch(inc_id):
        return None  # the id rules already said why
    key = name + "\n" + "\n".join(str(d) for d in ctx.resources.workflow_dirs)
    recorded = snapshot.kept("workflows", key, name=name)  # a run's, as it started
    if recorded is not None:
        found = Path(recorded["path"])
    else:
        found = ctx.resources.find_workflow(name) if ctx.resources.find_workflow else None
    if found is None:
        searched = folders_text(ctx.resources.workflow_dirs) or "no workflow folders are configured"
        ctx.error(
            where,
            f"{label}: included workflow {short_repr(name)} not found ({name}.yaml); looked in: {searched}",
        )
        return None
    resolved = str(Path(found).resolve())
    chain = ctx.include_chain
    if resolved in chain:
        names = " -> ".join(Path(p).stem for p in (*chain[chain.index(resolved) :], resolved))
        ctx.error(where, f"{label}: include cycle: {names}")
        return None
    if len(chain) > MAX_INCLUDE_DEPTH:
        ctx.error(where, f"{label}: includes nest more than {MAX_INCLUDE_DEPTH} deep ({name})")
        return None
    block = _load_block(found, ctx, (*chain, resolved), where, label, name, key)
    if block is None:
        return None
    inputs = _block_inputs(raw, block, path, label, ctx)
    if inputs is None:
        return None
    return _namespace(raw, inc_id, block, inputs, path, label, ctx, outer_ids)


def _check_fields(raw: dict, path: str, label: str, ctx: RuleContext) -> None:
    for key in raw:
        if key in LAUNCH_ONLY:
            ctx.error(
                child_path(path, key),
                f"{label}: {short_repr(key)} belongs on a 'workflow:' node (a child run of its "
                "own); an included block runs inside this run",
            )
        elif key not in INCLUDE_FIELDS:
            ctx.warn(
                child_path(path, key),
                f"{label}: field {short_repr(key)} has no effect on an include node (the "
                "included workflow's own nodes decide it)",
            )


def _load_block(found: Path, ctx: RuleContext, chain, where, label, name, key) -> dict | None:
    from loops.workflow.format import check_and_type
    from recipes.yaml_reader import MAX_SOURCE_BYTES, parse_yaml

    prefix = f"{label}: included workflow {short_repr(name)} ({found})"
    recorded = snapshot.kept("workflows", key, name=name)
    if recorded is not None:
        source = recorded["source"]
    else:
        try:
            data = Path(found).read_bytes()[: MAX_SOURCE_BYTES + 1]
            source = data.decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            ctx.error(where, f"{prefix} cannot be read: {exc}")
            return None
        if len(data) > MAX_SOURCE_BYTES:
            ctx.error(where, f"{prefix} is larger than {MAX_SOURCE_BYTES} bytes")
            return None
        snapshot.keep("workflows", key, {"path": str(found), "source": source})
    document, lines, yaml_problems = parse_yaml(source)
    if yaml_problems or not isinstance(document, dict):
        first = yaml_problems[0] if yaml_problems else "it is not a mapping of fields"
        ctx.error(where, f"{prefix}: {first}")
        return None
    inner = RuleContext(
        lines=lines,
        resources=ctx.resources.of_file(found),
        include_chain=chain,
        provider_fallback=True,
    )
    inner.commands_dirs = inner.resources.commands_dirs
    cleaned, errors, _ = check_and_type(document, inner)
    for problem in errors[:10]:
        ctx.error(where, f"{prefix}: {_in_file(problem)}")
    for problem in inner.warnings[:10]:
        ctx.warn(where, f"{prefix}: {_in_file(problem)}")
    return None if errors else cleaned


def _in_file(problem: Problem) -> str:
    return f"line {problem.line}: {problem.message}" if problem.line else problem.message


def _block_inputs(raw: dict, block: dict, path: str, label: str, ctx: RuleContext):
    """What the block's `$INPUTS.<name>` are: the include's `with:`, then declared defaults."""
    given = raw.get("with")
    with_path = child_path(path, "with")
    if given is None:
        given = {}
    elif not isinstance(given, dict):
        ctx.error(with_path, f"{label}: 'with' must be a mapping of input names to values")
        return None
    declared = block.get("inputs") or {}
    ok = True
    values: dict[str, Any] = {}
    for key, value in given.items():
        if declared and key not in declared:
            known = ", ".join(declared) or "none"
            ctx.error(
                child_path(with_path, str(key)),
                f"{label}: the included workflow has no input {short_repr(key)} (its inputs: {known})",
            )
            ok = False
        else:
            values[key] = value
    for key, spec in declared.items():
        if key in values:
            continue
        spec = spec if isinstance(spec, dict) else {}
        if spec.get("default") is not None:
            values[key] = spec["default"]
        elif spec.get("required"):
            ctx.error(
                with_path if raw.get("with") is not None else path,
                f"{label}: the included workflow needs input {short_repr(key)}: add it under "
                f"'with:' ({key}: ...)",
            )
            ok = False
    own_nodes = [n for n in block.get("nodes") or [] if not n.get("_included")]
    own = {m.group(1) for text in _strings(own_nodes) for m in _INPUT_REF.finditer(text)}
    for missing in sorted(own - set(values)):
        ctx.error(
            with_path if raw.get("with") is not None else path,
            f"{label}: the included workflow uses $INPUTS.{missing}, which this include does "
            f"not give: add it under 'with:' ({missing}: ...)",
        )
        ok = False
    return values if ok else None


def _strings(value: Any):
    """Every string inside a node (not its schema, id or names), recursively."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in _PLAIN_KEYS:
                yield from _strings(item)


def rewrite_strings(value: Any, change) -> Any:
    """A copy of `value` with `change(text)` applied to every string outside _PLAIN_KEYS."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, list):
        return [rewrite_strings(item, change) for item in value]
    if isinstance(value, dict):
        return {
            k: (v if k in _PLAIN_KEYS else rewrite_strings(v, change)) for k, v in value.items()
        }
    return value


def rename_outputs(text: str, names: dict[str, str]) -> str:
    """`$old.output[.field]` (and `$LOOP_PREV.old.output`) -> the new node's id."""

    def swap(m: re.Match) -> str:
        new = names.get(m.group(2))
        return m.group(0) if new is None else f"${m.group(1) or ''}{new}.output"

    return _OUTPUT_REF.sub(swap, text)


def _resolve_inputs(value: Any, inputs: dict) -> Any:
    """Put the block's inputs into a binding template: a whole `$INPUTS.x` keeps its type."""
    if not isinstance(value, str):
        return value
    whole = _INPUT_REF.fullmatch(value.strip())
    if whole and whole.group(1) in inputs:
        return inputs[whole.group(1)]
    from runs.engine.variables import render_value

    return _INPUT_REF.sub(
        lambda m: render_value(inputs[m.group(1)]) if m.group(1) in inputs else m.group(0), value
    )


def _namespace(raw, inc_id, block, inputs, path, label, ctx, outer_ids) -> Expansion | None:
    nodes = [n for n in block.get("nodes") or [] if isinstance(n, dict)]
    ids = [n["id"] for n in nodes]
    renamed = {old: f"{inc_id}__{old}" for old in ids}
    problem = _does_not_fit(nodes, renamed, outer_ids, label)
    if problem:
        ctx.error(path, problem)
        return None
    inside = {dep for n in nodes for dep in n.get("depends_on") or []}
    include_deps = (
        list(raw.get("depends_on") or []) if isinstance(raw.get("depends_on"), list) else []
    )
    out = [_renamed_node(node, raw, block, renamed, inputs, include_deps) for node in nodes]
    sinks = [renamed[i] for i in ids if i not in inside]
    returns = block.get("returns")
    primary = renamed.get(returns) if isinstance(returns, str) else None
    return Expansion(
        nodes=out,
        sinks=sinks,
        primary=primary or (sinks[0] if sinks else out[-1]["id"]),
        providers=dict(block.get("providers") or {}),
    )


def _does_not_fit(nodes: list[dict], renamed: dict, outer_ids, label: str) -> str | None:
    """Why the block's nodes, `renamed`, cannot sit among `outer_ids`: one of them takes
    an id already there, or one reads the output of a node of the workflow, not its own."""
    clash = sorted(set(renamed.values()) & set(outer_ids))
    if clash:
        return (
            f"{label}: the block's node {short_repr(clash[0])} clashes with a node of this workflow"
        )
    local = set(renamed) | {
        body["id"]
        for n in nodes
        for body in ((n.get("loop_group") or {}).get("nodes") or [])
        if isinstance(body, dict)
    }
    captured = sorted(
        {
            m.group(2)
            for text in _strings(nodes)
            for m in _OUTPUT_REF.finditer(text)
            if m.group(2) not in local and m.group(2) in outer_ids
        }
    )
    if captured:
        ref = captured[0]
        return (
            f"{label}: the included workflow refers to ${ref}.output, a node it does not have; "
            f"to give it this workflow's {ref}, declare an input and pass it: "
            f"with: {{{ref}: ${ref}.output}}"
        )
    return None


def _renamed_node(node: dict, raw: dict, block: dict, renamed: dict, inputs, include_deps):
    """One node of the block as it sits in the workflow: renamed, with the include's
    inputs bound, and, at an entry node, the include's own edges, trigger rule and `when`."""
    new = rewrite_strings(node, lambda text: rename_outputs(text, renamed))
    own = not node.get("_included")  # not a node of a block the block itself included
    new["id"] = renamed[node["id"]]
    deps = [renamed.get(d, d) for d in node.get("depends_on") or []]
    bindings = {k: _resolve_inputs(v, inputs) for k, v in (new.get("bindings") or {}).items()}
    if own:
        bindings = {**inputs, **bindings}
    if bindings:
        new["bindings"] = bindings
    if not node.get("depends_on"):  # an entry node: the include's edges attach here
        deps = include_deps
        if raw.get("trigger_rule") is not None:
            new["trigger_rule"] = raw["trigger_rule"]
        if isinstance(raw.get("when"), str):
            new["when"] = (
                f"({raw['when']}) and ({node['when']})" if node.get("when") else raw["when"]
            )
    new["depends_on"] = deps
    for key in ("provider", "model"):
        if own and block.get(key) is not None and node.get("kind") in AGENT_KINDS:
            new.setdefault(key, block[key])
    new["_included"] = True
    return new
