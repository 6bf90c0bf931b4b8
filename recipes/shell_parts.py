"""The parts of a recipe that run as code on a worker, and who may change them.

Writing shell is its own permission (``recipes.write_shell``, the *recipe author with
shell* role): an editor without it may change prompts, descriptions and everything else,
but saving a version whose shell parts differ from the current one's is refused
(``recipes.editing`` compares them on every save, from the admin, the API and the CLI).

Each recipe kind says what its shell parts are: a function from its spec to
``{where: text}``, registered with ``register_shell_parts(kind, function)``. A kind that adds
a shell-bearing field (a step machine's ``gates.run`` commands) registers or extends its
function, and the permission covers it at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable

__all__ = ["SHELL_PERMISSION", "register_shell_parts", "shell_parts", "shell_changes"]

SHELL_PERMISSION = "recipes.write_shell"

ShellParts = dict[str, str]
_KINDS: dict[str, list[Callable[[object], ShellParts]]] = {}


def register_shell_parts(kind: str, function: Callable[[object], ShellParts]) -> None:
    """Add a function listing shell parts of specs of ``kind`` (several may be registered)."""
    _KINDS.setdefault(kind, []).append(function)


def shell_parts(result) -> ShellParts:
    """Every shell part of a validated recipe (a recipes.loader.LoadResult): where -> text.
    A source that does not load has none that could run."""
    if result is None or result.spec is None:
        return {}
    parts: ShellParts = {}
    for function in _KINDS.get(result.kind, []):
        parts.update(function(result.spec))
    return parts


def shell_changes(before: ShellParts, after: ShellParts) -> list[str]:
    """Where the shell parts differ (added, removed or changed), in a stable order."""
    return sorted(
        where for where in before.keys() | after.keys() if before.get(where) != after.get(where)
    )


# --- kind: workflow --------------------------------------------------------------------


def _workflow_nodes(nodes, prefix: str, parts: ShellParts) -> None:
    for node in nodes:
        where = f"{prefix}{node.id}"
        if node.bash is not None:
            parts[f"{where}.bash"] = node.bash
        if getattr(node, "script", None) is not None:  # code run by uv or bun, its packages
            script = {"script": node.script, "runtime": node.runtime, "deps": node.deps}
            parts[f"{where}.script"] = json.dumps(script, sort_keys=True)
        if node.loop is not None and node.loop.until_bash:
            parts[f"{where}.loop.until_bash"] = node.loop.until_bash
        if node.loop_group is not None:
            if node.loop_group.until_bash:
                parts[f"{where}.loop_group.until_bash"] = node.loop_group.until_bash
            _workflow_nodes(node.loop_group.nodes, f"{where}.", parts)


def workflow_shell_parts(spec) -> ShellParts:
    """bash steps, script nodes, until_bash checks (loop_group bodies too), every inline
    provider: a command provider runs its command, and any inline provider chooses where
    requests and keys go (base_url, api_key_env)."""
    parts: ShellParts = {}
    _workflow_nodes(spec.nodes, "nodes.", parts)
    for name, provider in (spec.providers or {}).items():
        parts[f"providers.{name}"] = json.dumps(provider.model_dump(), sort_keys=True)
    return parts


def python_shell_parts(spec) -> ShellParts:
    """A Python recipe is code from start to end (they come from recipe folders only)."""
    return {"source": spec.source}


register_shell_parts("workflow", workflow_shell_parts)
register_shell_parts("python", python_shell_parts)


def planeai_shell_parts(spec) -> ShellParts:
    """A step machine runs shell only in `gates.run`: the commands as the recipe writes them
    (templates of recipe text, rendered when the step runs)."""
    parts: ShellParts = {}
    for step in spec.steps:
        for index, gate in enumerate(step.gates):
            parts[f"steps.{step.id}.gates.{index}.{gate.name}"] = gate.command
    return parts


def driven_shell_parts(spec) -> ShellParts:
    """A driven recipe's inline providers (a command provider runs its command; any inline
    provider chooses where requests and keys go) and the hooks the worker will call."""
    parts: ShellParts = {}
    for name, provider in (spec.providers or {}).items():
        parts[f"providers.{name}"] = json.dumps(provider.model_dump(), sort_keys=True)
    for agent_id, agent in (spec.agents or {}).items():
        loop = getattr(agent, "loop", None)
        hooks = getattr(loop, "hooks", None) if loop is not None else None
        if hooks:
            data = hooks.model_dump() if hasattr(hooks, "model_dump") else dict(hooks)
            parts[f"agents.{agent_id}.loop.hooks"] = json.dumps(data, sort_keys=True)
    return parts


register_shell_parts("planeai", planeai_shell_parts)
register_shell_parts("driven", driven_shell_parts)
