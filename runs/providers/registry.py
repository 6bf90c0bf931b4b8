"""Resolve a recipe's `provider:` name to a Provider instance."""

from __future__ import annotations

from django.conf import settings

from .base import Provider, ProviderError
from .command import CommandProvider
from .demo import DemoProvider

BUILTIN = {"demo"}


def build(name: str, kind: str, config: dict) -> Provider:
    if kind == "demo":
        return DemoProvider(
            name,
            delay=config.get("delay", settings.LOOP_DEMO_DELAY),
            complete_after=config.get("complete_after"),
        )
    if kind == "command":
        return CommandProvider(name, config.get("command") or "")
    raise ProviderError(f"provider '{name}': kind '{kind}' is not available in this console")


def resolve(name: str | None, spec) -> Provider:
    """`spec` is the recipe's WorkflowSpec (its `providers:` map declares inline agents)."""
    name = name or getattr(spec, "provider", None) or settings.LOOP_DEFAULT_PROVIDER
    declared = (getattr(spec, "providers", None) or {}).get(name)
    if declared is not None:
        config = {**(declared.options or {}), "command": declared.command}
        return build(name, declared.kind, config)
    if name in BUILTIN:
        return build(name, name, {})
    raise ProviderError(
        f"provider '{name}' is not configured: declare it in the recipe's `providers:` map "
        f'(for example `{name}: {{kind: command, command: "..."}}`) or use `provider: demo`'
    )
