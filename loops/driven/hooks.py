"""A driven loop's hooks: Python functions named by dotted paths in the recipe.

    hooks: {on_iteration_end: "my_project.loop_hooks:trim", on_error: "my_project.loop_hooks:retry"}

Each is called with one dict (the context of its moment, see HOOK_CONTEXT) and may
return a value (on_iteration_end: `{"output": ...}` to replace what the host sees;
on_error: a resolution, see `resolution`). A hook that raises fails the loop with its
message.

A path is code the worker runs, so it must come from a module an administrator allowed
(LOOP_HOOK_MODULES, a list of module prefixes), must import, and must name a function.
That is checked when the recipe is validated (with the line of the path) and again when
the hook is called, so a recipe saved under another setting cannot call something else.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass

from django.conf import settings

HOOK_NAMES = ("on_init", "on_iteration_start", "on_iteration_end", "on_error", "on_finish")
# What each hook receives (the keys of its one argument).
HOOK_CONTEXT = {
    "on_init": ("loopId", "pipeline", "maxIterations"),
    "on_iteration_start": ("loopId", "iteration", "input"),
    "on_iteration_end": ("loopId", "iteration", "output"),
    "on_error": ("loopId", "iteration", "error"),
    "on_finish": ("loopId", "status", "iterations"),
}


class HookError(Exception):
    """A hook could not be found, raised, or returned something it may not."""


def split_path(path: str) -> tuple[str, str]:
    """`package.module:function` (or `package.module.function`) → (module, function)."""
    module, sep, name = path.partition(":")
    if not sep:
        module, _, name = path.rpartition(".")
    return module.strip(), name.strip()


def _allowed(module: str) -> bool:
    return any(
        module == prefix or module.startswith(prefix + ".") for prefix in settings.LOOP_HOOK_MODULES
    )


def resolve(path: str):
    """The function `path` names, or HookError saying why not."""
    module_name, name = split_path(path)
    if not module_name or not name:
        raise HookError(f"{path!r} is not a dotted path to a function (package.module:function)")
    if not _allowed(module_name):
        allowed = ", ".join(settings.LOOP_HOOK_MODULES) or "none"
        raise HookError(
            f"module {module_name!r} is not one hooks may come from (LOOP_HOOK_MODULES: {allowed})"
        )
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the author's to read
        raise HookError(f"{module_name!r} does not import: {type(exc).__name__}: {exc}") from None
    function = getattr(module, name, None)
    if function is None:
        raise HookError(f"module {module_name!r} has no {name!r}")
    if not inspect.isfunction(function):
        raise HookError(f"{path!r} is not a function")
    return function


def problem(path: str) -> str | None:
    """Why `path` cannot be a hook, or None (for validation)."""
    try:
        resolve(path)
    except HookError as exc:
        return str(exc)
    return None


@dataclass
class Hooks:
    """The hooks of one loop, called by name; a missing hook does nothing."""

    paths: dict[str, str]

    def call(self, name: str, **context):
        path = self.paths.get(name)
        if not path:
            return None
        try:
            function = resolve(path)
        except HookError as exc:
            raise HookError(f"hook {name}: {exc}") from None
        try:
            return function(context)
        except Exception as exc:  # noqa: BLE001 - a hook that raises fails the loop
            raise HookError(f"hook {name} ({path}) raised {type(exc).__name__}: {exc}") from None


@dataclass(frozen=True)
class Resolution:
    action: str  # recover / retry / fail
    output: object = None
    reason: str = ""


def resolution(value) -> Resolution:
    """What an on_error hook asked for. None (or nothing returned) means fail, as when there
    is no hook: "retry", "fail", or a mapping {"action": "recover", "output": ...},
    {"action": "retry"}, {"action": "fail", "reason": "..."}; {"recover": output} is short
    for recovering with that output."""
    if value is None:
        return Resolution("fail")
    if isinstance(value, str) and value in ("retry", "fail"):
        return Resolution(value)
    if isinstance(value, dict):
        if "action" not in value and "recover" in value:
            return Resolution("recover", value["recover"])
        action = value.get("action")
        if action == "recover":
            if "output" not in value:
                raise HookError("on_error returned recover without an output")
            return Resolution("recover", value["output"])
        if action in ("retry", "fail"):
            return Resolution(action, reason=str(value.get("reason") or ""))
    raise HookError(
        f"on_error returned {value!r}; expected None, 'retry', 'fail' or "
        "{'action': 'recover', 'output': ...}"
    )
