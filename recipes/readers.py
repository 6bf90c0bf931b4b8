"""The kinds of loop as the catalogue sees them: who reads a source, what of it is shell,
what name a recipe gives itself.

The kinds are registered with the kernel (runs.kinds). The kernel imports the catalogue (a
run's recipe, its spec), so the catalogue does not import the kernel back: the kernel
plugs its registry in from `RunsConfig.ready()` (`use_registry`), as it does its provider
lookups (recipes.validation.use_providers).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from django.core.exceptions import ImproperlyConfigured

_registry: ModuleType | None = None


def use_registry(registry: ModuleType) -> None:
    global _registry
    _registry = registry


def _kinds() -> ModuleType:
    if _registry is None:
        raise ImproperlyConfigured("no kind registry: the runs app gives it in ready()")
    return _registry


def readers() -> list[Any]:
    """The registered kinds, in the order they are asked whose a source is."""
    return _kinds().readers()


def find(name: str) -> Any | None:
    """The kind registered as `name`, or None: no installed app registers it (the catalogue
    then fails closed: its source is all shell, and it does not run)."""
    registry = _kinds()
    return registry.get(name) if registry.is_registered(name) else None


def get(name: str) -> Any:
    """The kind registered as `name` (runs.kinds.UnknownKind when none is)."""
    return _kinds().get(name)
