"""Subcommands of `manage.py loop`, one module each, found by `discover`.

A module defines NAME, HELP, `add_arguments(parser)` and `handle(command, options)`; a new
loop kind adds its own module here without touching the others.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def discover() -> list[ModuleType]:
    modules = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            modules.append(importlib.import_module(f"{__name__}.{info.name}"))
    return [m for m in modules if hasattr(m, "NAME")]
