"""Rules for `script:` nodes (Python through uv, TypeScript/JavaScript through bun) and for
the `with:` bindings a script or command node reads as `$INPUTS.<name>` / `INPUTS_<NAME>`.

A script is code the recipe author wrote: values from people and agents reach it only as
data (the environment), never as part of its text. A reference such as `$USER_MESSAGE` or
`$plan.output` inside a string literal of inline code is rewritten to read the environment
(runs.engine.script_literals: the peer's meaning, "this text, here"); anywhere else it is
refused here, with what to write instead. A named script is a file and is never rewritten.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from recipes.formats.commands import CommandError, check_name, usable_entry
from recipes.formats.resources import folders_text
from recipes.formats.rule_context import (
    AGENT_ONLY_FIELDS,
    ID_PATTERN,
    RuleContext,
    is_blank,
    require_text,
)
from recipes.problems import child_path, short_repr
from runs.engine.script_literals import rewrite_literals
from runs.engine.shell_rewrite import ENVIRONMENT_NAMES
from runs.engine.variables import input_env_name

RUNTIMES = {"uv": (".py",), "bun": (".ts", ".js")}
# A value with a newline or any of these is inline code; otherwise it names a script file.
INLINE_MARKERS = frozenset(" \t\n;(){}&|<>$`\"'")
_ENV_READ = {"uv": "os.environ[{name!r}]", "bun": "process.env.{name}"}


def is_inline(script: str) -> bool:
    return any(c in INLINE_MARKERS for c in script)


def check_script(raw: dict, out: dict, path: str, label: str, ctx: RuleContext) -> None:
    """Check a script node and complete `out` (its cleaned mapping) in place."""
    for key in AGENT_ONLY_FIELDS:
        if key in out:
            ctx.warn(
                child_path(path, key),
                f"{label}: field {short_repr(key)} has no effect on a script node (no agent "
                "is called" + ("; use 'timeout'" if key == "idle_timeout" else "") + ")",
            )
            del out[key]
    require_text(raw, "script", path, ctx, f"{label}: a script node needs code or a script name")
    runtime = raw.get("runtime")
    runtime_path = child_path(path, "runtime")
    if runtime is None:
        ctx.error(runtime_path, f"{label}: a script node needs 'runtime: uv' or 'runtime: bun'")
    elif runtime not in RUNTIMES:
        ctx.error(runtime_path, f"{label}: runtime {short_repr(runtime)} is not one of: uv, bun")
        out.pop("runtime", None)
    _check_deps(raw, out, path, label, ctx)
    script = raw.get("script")
    if not isinstance(script, str) or is_blank(script) or runtime not in RUNTIMES:
        return
    script_path = child_path(path, "script")
    if is_inline(script):
        bindings = dict(out.get("bindings") or {})
        code, refusals = rewrite_literals(script, runtime, _carrier(bindings))
        for refusal in refusals:
            message = _reference_problem(label, refusal.line, refusal.ref, runtime, refusal.why)
            problem = ctx.lines.problem(script_path, message)
            if problem.line is not None and "\n" in script.rstrip("\n"):
                # A block scalar starts on the line below its key: point at the code's line.
                problem = replace(problem, line=problem.line + refusal.line)
            ctx.errors.append(problem)
        if not refusals and code != script:
            out["script"], out["bindings"] = code, bindings
        return
    found = _find_script(script.strip(), runtime, script_path, label, ctx)
    if found is not None:
        out["script_path"] = str(found)


def _check_deps(raw: dict, out: dict, path: str, label: str, ctx: RuleContext) -> None:
    deps = raw.get("deps")
    if deps is None:
        return
    deps_path = child_path(path, "deps")
    if raw.get("runtime") == "bun":
        ctx.warn(
            deps_path,
            f"{label}: 'deps' is for runtime uv; bun installs what a script imports, so it "
            "is ignored",
        )
        out.pop("deps", None)
        return
    if not isinstance(deps, list):
        return  # pydantic: must be a list
    for j, dep in enumerate(deps):
        if isinstance(dep, str) and dep.strip().startswith("-"):
            ctx.error(
                child_path(deps_path, j),
                f"{label}: dependency {short_repr(dep)} looks like an option; write a "
                "package requirement such as 'httpx>=0.27'",
            )


def _carrier(bindings: dict):
    """The environment variable that carries a reference to a script: the names every step
    gets as they are; any other value through a binding of its own (`INPUTS__REF_<n>`)."""
    made: dict[str, str] = {}

    def env_name(ref: str) -> str:
        if ref in ENVIRONMENT_NAMES:
            return ref[1:]
        if ref not in made:
            number = len(made) + 1
            while f"_ref_{number}" in bindings:
                number += 1
            bindings[f"_ref_{number}"] = ref
            made[ref] = input_env_name(f"_ref_{number}")
        return made[ref]

    return env_name


def _reference_problem(label: str, line: int, ref: str, runtime: str, why: str) -> str:
    """Why `ref` cannot be written there, and how to read the value instead."""
    name = ref[1:]
    if name.startswith("INPUTS."):
        env, how = input_env_name(name.split(".", 1)[1]), ""
    elif "." in name:  # $node.output, $LOOP_PREV.node.output
        env = "INPUTS_NAME"
        how = f" after binding it on the node with `with: {{name: {ref}}}`"
    else:
        env, how = name, ""
    read = _ENV_READ[runtime].format(name=env)
    language = "Python" if runtime == "uv" else "TypeScript/JavaScript"
    return (
        f"{label}, line {line} of the script: {ref} has no safe meaning there: {why}. "
        f"Inside a {language} string literal it would be read from the environment; here, "
        f"values reach scripts only as data: read {read}{how} instead"
    )


def _find_script(name: str, runtime: str, path: str, label: str, ctx: RuleContext) -> Path | None:
    try:
        check_name(name, "script")
    except CommandError as exc:
        ctx.error(path, f"{label}: {exc}")
        return None
    wanted = RUNTIMES[runtime]
    for folder in ctx.resources.scripts_dirs:
        for suffix in (".py", ".ts", ".js"):
            candidate = Path(folder) / f"{name}{suffix}"
            try:
                if not usable_entry(candidate, folder, f"{label}: script {short_repr(name)}"):
                    continue
            except (CommandError, OSError) as exc:
                ctx.error(path, str(exc))
                return None
            if suffix not in wanted:
                other = next(r for r, s in RUNTIMES.items() if suffix in s)
                ctx.error(
                    path,
                    f"{label}: script {short_repr(name)} is {candidate.name}, which runs with "
                    f"runtime {other}, but the node says runtime {runtime}",
                )
                return None
            return candidate
    files = " or ".join(f"{name}{s}" for s in wanted)
    searched = folders_text(ctx.resources.scripts_dirs) or "no scripts folders are configured"
    ctx.error(
        path, f"{label}: script {short_repr(name)} not found ({files}); looked in: {searched}"
    )
    return None


def check_bindings(value: Any, path: str, label: str, ctx: RuleContext) -> dict:
    """`with:` of a script or command node: name -> a JSON value (a string is a template:
    `$plan.output`), or `{from: $ref, if_skipped: value}`."""
    if not isinstance(value, dict):
        if value is not None:
            ctx.error(path, f"{label}: 'with' must be a mapping of input names to values")
        return {}
    env_names: dict[str, str] = {}
    cleaned: dict[str, Any] = {}
    for name, bound in value.items():
        key_path = child_path(path, str(name))
        if not isinstance(name, str) or not ID_PATTERN.fullmatch(name):
            ctx.error(
                key_path,
                f"{label}: input name {short_repr(name)} must start with a letter or '_' and "
                "use letters, digits, '_' or '-'",
            )
            continue
        env = input_env_name(name)
        if env in env_names:
            ctx.error(
                key_path,
                f"{label}: inputs {short_repr(env_names[env])} and {short_repr(name)} would "
                f"both arrive as {env}; rename one",
            )
            continue
        env_names[env] = name
        if isinstance(bound, dict) and "from" in bound:
            extra = set(bound) - {"from", "if_skipped"}
            if extra or not isinstance(bound["from"], str):
                ctx.error(
                    key_path,
                    f"{label}: a binding directive is {{from: $node.output, if_skipped: "
                    "value}} and nothing else",
                )
                continue
            if bound["from"].lstrip().startswith("$LOOP_PREV"):
                # $LOOP_PREV is text substituted each pass, not a node reference.
                ctx.error(
                    child_path(key_path, "from"),
                    f"{label}: a binding directive's 'from' cannot read $LOOP_PREV (it is not a "
                    f"node reference); write the string form instead: {name}: {bound['from']}",
                )
                continue
        cleaned[name] = bound
    return cleaned
