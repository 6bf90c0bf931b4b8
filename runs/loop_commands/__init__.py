"""Subcommands of `manage.py loop`, one module each: the kernel's own here, found by
`discover`, and each loop kind's (`LoopKind.loop_commands`).

A module defines NAME, HELP, `add_arguments(parser)` and `handle(command, options)`; a loop
kind adds its modules from its own package, without touching these.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from runs import kinds


def discover() -> list[ModuleType]:
    modules = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            modules.append(importlib.import_module(f"{__name__}.{info.name}"))
    return [m for m in modules if hasattr(m, "NAME")]


def every_command() -> list[ModuleType]:
    """The kernel's subcommands and every registered kind's, by name."""
    found = {m.NAME: m for m in discover()}
    for kind in kinds.all_kinds():
        for name, module in kind.loop_commands.items():
            if name in found and found[name] is not module:
                raise ValueError(f"manage.py loop {name} is given twice ({kind.name})")
            found[name] = module
    return [found[name] for name in sorted(found)]
