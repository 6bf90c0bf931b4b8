"""``kind: driven`` recipes: the rules an author reads, then the types.

    kind: driven
    name: Launch note with self-critique
    providers: {...}                  # as in workflow recipes
    agents:
      researcher: {provider: ..., instructions: ..., output_schema: {...}}
      host:
        provider: ...
        instructions: ...
        loop: {pool: [researcher, ...], max_iterations: 10, hooks: {...}, retry: 2}
    host: host

Like workflow recipes, every problem carries its field path and line; unknown fields are
warnings. Hook paths must import (loops.driven.hooks says which modules they may come from).
"""

from __future__ import annotations

from pydantic import ValidationError

from loops.driven.spec import DrivenSpec
from recipes.formats.field_rules import check_input, check_output_schema
from recipes.formats.problem_mapping import validation_problems
from recipes.formats.rule_context import ID_PATTERN, RuleContext, is_blank, require_text
from recipes.problems import LineMap, LoadResult, child_path, short_repr, sort_problems

KIND = "driven"
TOP_LEVEL_FIELDS = frozenset(
    "kind name description provider model providers inputs agents host".split()
)
AGENT_FIELDS = frozenset("instructions provider model output_schema idle_timeout loop".split())
LOOP_FIELDS = frozenset({"pool", "max_iterations", "hooks", "retry"})


def is_driven(data: dict) -> bool:
    return data.get("kind") == KIND


def parse_driven(data: dict, lines: LineMap, *, provider_fallback: bool = True) -> LoadResult:
    """Validate a decoded ``kind: driven`` document. Never raises for bad input."""
    ctx = RuleContext(lines=lines, provider_fallback=provider_fallback)
    cleaned = _check(data, ctx)
    errors = list(ctx.errors)
    spec = None
    try:
        spec = DrivenSpec.model_validate(cleaned)
    except ValidationError as exc:
        reported = {p.path for p in errors}
        for problem in validation_problems(exc, lines):
            if problem.path not in reported:
                reported.add(problem.path)
                errors.append(problem)
    return LoadResult(
        kind=KIND,
        spec=None if errors else spec,
        errors=sort_problems(errors),
        warnings=sort_problems(ctx.warnings),
    )


def _check(data: dict, ctx: RuleContext) -> dict:
    for key in data:
        if key not in TOP_LEVEL_FIELDS:
            ctx.warn(child_path("", key), f"unknown top-level field {short_repr(key)} is ignored")
    cleaned = {k: v for k, v in data.items() if k in TOP_LEVEL_FIELDS and v is not None}
    require_text(data, "name", "", ctx, "a driven recipe needs a 'name'")
    cleaned.setdefault("description", "")
    inputs = cleaned.get("inputs")
    if isinstance(inputs, dict):
        cleaned["inputs"] = {name: check_input(name, spec, ctx) for name, spec in inputs.items()}
    agents = data.get("agents")
    if agents is None:
        ctx.error("agents", "a driven recipe declares its agents (agents: {id: {...}, ...})")
        return cleaned
    if not isinstance(agents, dict):
        return cleaned  # pydantic: must be a mapping
    if not agents:
        ctx.error("agents", "must declare at least one agent")
        return cleaned
    host = data.get("host")
    cleaned["agents"] = {
        name: _check_agent(name, agent, ctx, is_host=name == host, top=data)
        for name, agent in agents.items()
    }
    _check_host(host, agents, ctx)
    check_pool(data, ctx)
    return cleaned


def _check_agent(name, agent, ctx: RuleContext, *, is_host: bool, top: dict):
    path = child_path("agents", str(name))
    if not isinstance(name, str) or not ID_PATTERN.fullmatch(name):
        ctx.error(
            path,
            f"invalid agent id {short_repr(name)}: use letters, digits, '_' or '-', starting "
            "with a letter or '_'",
        )
    if not isinstance(agent, dict):
        if agent is None:
            ctx.error(path, f"agent {short_repr(name)} needs instructions (instructions: ...)")
        return agent
    label = f"agent {short_repr(name)}"
    for key in agent:
        if key not in AGENT_FIELDS:
            ctx.warn(child_path(path, key), f"{label}: unknown field {short_repr(key)} is ignored")
    out = {k: v for k, v in agent.items() if k in AGENT_FIELDS and v is not None}
    require_text(agent, "instructions", path, ctx, f"{label} needs instructions")
    if isinstance(agent.get("output_schema"), dict):
        check_output_schema(agent["output_schema"], child_path(path, "output_schema"), ctx)
    if not ctx.provider_fallback and agent.get("provider") is None and top.get("provider") is None:
        ctx.error(
            path,
            f"{label} names no provider and no default provider is set: add `provider: NAME` "
            "to the agent or at the top of the recipe (`provider: demo` is the built-in demo "
            "agent), or mark a provider as the default in the admin",
        )
    if "loop" in out:
        if is_host:
            out["loop"] = _check_loop(agent["loop"], child_path(path, "loop"), label, ctx)
        else:
            ctx.warn(
                child_path(path, "loop"),
                f"{label}: only the host's loop is used ({label} is not named by `host:`); "
                "this loop block is ignored",
            )
            del out["loop"]
    return out


def _check_host(host, agents: dict, ctx: RuleContext) -> None:
    if host is None:
        ctx.error("host", "a driven recipe names its host agent (host: ID), the one with a loop")
        return
    if not isinstance(host, str) or is_blank(host):
        return  # pydantic: must be a non-empty string
    if host not in agents:
        declared = ", ".join(map(str, agents))
        ctx.error("host", f"host {short_repr(host)} is not a declared agent (agents: {declared})")
        return
    agent = agents[host]
    if isinstance(agent, dict) and agent.get("loop") is None:
        ctx.error(
            child_path("agents", host),
            f"the host {short_repr(host)} needs a loop block "
            "(loop: {pool: [...], max_iterations: N})",
        )


# The design writes its fields in camelCase (`maxIterations`, `onInit`, ...): accepted as
# written, read as the snake_case names this format uses.
CAMEL_LOOP_FIELDS = {"maxIterations": "max_iterations"}
CAMEL_HOOKS = {
    "onInit": "on_init",
    "onIterationStart": "on_iteration_start",
    "onIterationEnd": "on_iteration_end",
    "onError": "on_error",
    "onFinish": "on_finish",
}


def _snake_case(block: dict, names: dict, path: str, label: str, ctx: RuleContext) -> dict:
    """`block` with the design's camelCase keys under their snake_case names; both
    spellings of one field is an error."""
    out = {}
    for key, value in block.items():
        name = names.get(key, key)
        if name in out:
            ctx.error(
                child_path(path, key),
                f"{label}: {short_repr(name)} is given twice (as {short_repr(key)} too)",
            )
            continue
        out[name] = value
    return out


# The design bounds on_error's retries by `LoopConfig.errorHandling.retry`; this format's
# own name for it is the loop's `retry`.
ERROR_HANDLING = "errorHandling"
ERROR_HANDLING_FIELDS = {"retry": "retry"}


def _read_error_handling(block: dict, path: str, label: str, ctx: RuleContext) -> dict:
    """`block` with the fields of its `errorHandling` block moved to the loop's own names;
    a field given both ways with different values is an error."""
    block = dict(block)
    handling = block.pop(ERROR_HANDLING)
    where = child_path(path, ERROR_HANDLING)
    if handling is None:
        return block
    if not isinstance(handling, dict):
        ctx.error(where, f"{label}: errorHandling is a mapping (errorHandling: {{retry: N}})")
        return block
    for key, value in handling.items():
        name = ERROR_HANDLING_FIELDS.get(key)
        if name is None:
            ctx.warn(
                child_path(where, key),
                f"{label}: unknown errorHandling field {short_repr(key)} is ignored "
                f"(errorHandling: {{{', '.join(ERROR_HANDLING_FIELDS)}}})",
            )
        elif name in block and block[name] != value:
            ctx.error(
                child_path(where, key),
                f"{label}: errorHandling.{key} ({short_repr(value)}) and {name} "
                f"({short_repr(block[name])}) disagree: give one of them",
            )
        else:
            # A mistake in the value points at the line the author wrote it on.
            ctx.lines.set(child_path(path, name), *ctx.lines.locate(child_path(where, key)))
            block[name] = value
    return block


def _check_loop(block, path: str, label: str, ctx: RuleContext):
    if not isinstance(block, dict):
        return block  # pydantic: must be a mapping
    block = _snake_case(block, CAMEL_LOOP_FIELDS, path, label, ctx)
    if ERROR_HANDLING in block:
        block = _read_error_handling(block, path, label, ctx)
    if isinstance(block.get("hooks"), dict):
        block["hooks"] = _snake_case(
            block["hooks"], CAMEL_HOOKS, child_path(path, "hooks"), label, ctx
        )
    for key in block:
        if key not in LOOP_FIELDS:
            ctx.warn(
                child_path(path, key), f"{label}: unknown loop field {short_repr(key)} is ignored"
            )
    out = {k: v for k, v in block.items() if k in LOOP_FIELDS and v is not None}
    if block.get("pool") is None:
        ctx.error(child_path(path, "pool"), f"{label}: the loop needs a pool (pool: [agent, ...])")
    if block.get("max_iterations") is None:
        ctx.error(
            child_path(path, "max_iterations"),
            f"{label}: max_iterations is required (a positive integer: the loop's hard cap)",
        )
    hooks = block.get("hooks")
    if isinstance(hooks, dict):
        _check_hooks(hooks, child_path(path, "hooks"), ctx)
    return out


def _check_hooks(hooks: dict, path: str, ctx: RuleContext) -> None:
    from loops.driven.hooks import HOOK_NAMES, problem

    for name, target in hooks.items():
        where = child_path(path, str(name))
        if name not in HOOK_NAMES:
            ctx.error(where, f"unknown hook {short_repr(name)} (hooks: {', '.join(HOOK_NAMES)})")
        elif isinstance(target, str) and target.strip():
            reason = problem(target.strip())
            if reason:
                ctx.error(where, f"hook {name}: {reason}")


def check_pool(data: dict, ctx: RuleContext) -> None:  # the host's pool, once it is known
    """Every pool id names a declared agent, once."""
    agents = data.get("agents")
    host = data.get("host")
    if not isinstance(agents, dict) or not isinstance(agents.get(host), dict):
        return
    loop = agents[host].get("loop")
    pool = loop.get("pool") if isinstance(loop, dict) else None
    if not isinstance(pool, list):
        return
    path = child_path(child_path(child_path("agents", host), "loop"), "pool")
    if not pool:
        ctx.error(path, "the pool must name at least one agent")
    seen: set = set()
    for index, member in enumerate(pool):
        where = child_path(path, index)
        if not isinstance(member, str):
            continue  # pydantic: must be a string
        if member not in agents:
            declared = ", ".join(map(str, agents))
            ctx.error(where, f"pool: {short_repr(member)} is not a declared agent ({declared})")
        elif member in seen:
            ctx.error(where, f"pool: {short_repr(member)} is listed twice")
        seen.add(member)
