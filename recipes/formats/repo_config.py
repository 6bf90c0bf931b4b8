"""A repository's `.archon/config.yaml`, as far as its workflows depend on it: model aliases
and the default assistant.

    assistant: claude              # the provider for agent nodes that name none
    aliases:
      '@mini': {provider: claude, model: haiku}

A node's (or the workflow's) `model: '@mini'` resolves through the aliases when the recipe
loads: the model becomes the alias's model and the provider the alias's provider (a
different `provider:` written beside it gives way, with a warning, as in the peer). An
unknown alias is an error. The default assistant is kept on the spec
(`WorkflowSpec.default_provider`) and used when neither the node, the workflow nor the
console names a provider (runs.providers.registry).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from recipes.formats.rule_context import RuleContext
from recipes.problems import child_path, short_repr

__all__ = ["read_config", "resolve_model_aliases"]

CONFIG_FILE = "config.yaml"
MAX_CONFIG_BYTES = 200_000


def read_config(archon: Path | None) -> tuple[dict, str, str]:
    """(aliases, default assistant, problem) of the `.archon` folder's config.yaml."""
    if archon is None:
        return {}, "", ""
    path = archon / CONFIG_FILE
    try:
        if not path.is_file():
            return {}, "", ""
        if path.stat().st_size > MAX_CONFIG_BYTES:
            return {}, "", f"{CONFIG_FILE} is larger than {MAX_CONFIG_BYTES:,} bytes"
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        return {}, "", f"{CONFIG_FILE} could not be read ({type(exc).__name__})"
    if not isinstance(data, dict):
        return {}, "", ""
    assistant = data.get("assistant")
    assistant = assistant.strip() if isinstance(assistant, str) else ""
    aliases: dict[str, Any] = {}
    raw = data.get("aliases")
    if isinstance(raw, dict):
        for name, preset in raw.items():
            if isinstance(name, str) and name.strip():
                aliases["@" + name.strip().lstrip("@")] = preset
    return aliases, assistant, ""


def resolve_model_aliases(out: dict, path: str, label: str, ctx: RuleContext) -> None:
    """`model: '@name'` of a node or a workflow (`out`, its cleaned mapping), in place."""
    model = out.get("model")
    if not isinstance(model, str) or not model.startswith("@"):
        return
    model_path = child_path(path, "model")
    aliases = ctx.resources.model_aliases
    preset = aliases.get(model.strip())
    if preset is None:
        known = ", ".join(sorted(aliases)) or "none"
        where = ctx.resources.config_problem or f"declared in .archon/{CONFIG_FILE}: {known}"
        ctx.error(
            model_path,
            f"{label}: model alias {short_repr(model)} is not defined ({where}); define it "
            f"under `aliases:` in .archon/{CONFIG_FILE} or write a model name",
        )
        return
    if not isinstance(preset, dict) or not isinstance(preset.get("model"), str):
        ctx.error(
            model_path,
            f"{label}: model alias {short_repr(model)} in .archon/{CONFIG_FILE} must be a "
            "mapping with a `model:` (and a `provider:`)",
        )
        return
    provider = preset.get("provider")
    written = out.get("provider")
    if isinstance(provider, str) and provider.strip():
        if isinstance(written, str) and written.strip() != provider.strip():
            ctx.warn(
                child_path(path, "provider"),
                f"{label}: provider {short_repr(written)} gives way to {short_repr(provider)}, "
                f"the provider of model alias {short_repr(model)}",
            )
        out["provider"] = provider.strip()
    out["model"] = preset["model"]
