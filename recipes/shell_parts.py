"""The parts of a recipe that run as code on a worker, and who may change them.

Writing shell is its own permission (``recipes.write_shell``, the *recipe author with
shell* role): an editor without it may change prompts, descriptions and everything else,
but saving a version whose shell parts differ from the current one's is refused
(``recipes.editing`` compares them on every save, from the admin, the API and the CLI).

Each recipe kind says what its shell parts are (`runs.kinds.LoopKind.shell_parts`). The
rule fails closed: a kind that declares none, or a kind no installed app registers, has
its whole source counted as one shell part, so an editor without the permission cannot
change any of it.
"""

from __future__ import annotations

import json

from recipes import readers

__all__ = ["SHELL_PERMISSION", "inline_provider_parts", "shell_changes", "shell_parts"]

SHELL_PERMISSION = "recipes.write_shell"

ShellParts = dict[str, str]


def shell_parts(result, source: str = "") -> ShellParts:
    """Every shell part of a loaded recipe (a recipes.loader.LoadResult of `source`):
    where -> text. A source that does not load has none that could run."""
    if result is None or result.spec is None:
        return {}
    kind = readers.find(result.kind)
    declared = kind.shell_parts(result.spec) if kind is not None else None
    return {"source": source} if declared is None else declared


def shell_changes(before: ShellParts, after: ShellParts) -> list[str]:
    """Where the shell parts differ (added, removed or changed), in a stable order."""
    return sorted(
        where for where in before.keys() | after.keys() if before.get(where) != after.get(where)
    )


def inline_provider_parts(spec) -> ShellParts:
    """A recipe's inline providers, for a kind whose format has them: a command provider
    runs its command, and any inline provider chooses where requests and keys go
    (base_url, api_key_env)."""
    return {
        f"providers.{name}": json.dumps(provider.model_dump(), sort_keys=True)
        for name, provider in (getattr(spec, "providers", None) or {}).items()
    }
