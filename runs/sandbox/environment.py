"""The environment a child process gets: a short allow-list of the worker's, never its
secrets, plus the run's values.

The worker holds secrets (DATABASE_URL, SECRET_KEY, every provider's key): a child gets
the names below, the run's values passed in `env`, and the names a provider kind declares
for itself (`inherited`), never the rest. In the sandbox HOME is the run's own folder (or
a private /tmp) and TMPDIR the sandbox's private /tmp; without it both stay the worker's.
"""

from __future__ import annotations

import os

from django.conf import settings

from console.secrets import secret

BASE_CHILD_ENV = frozenset(
    ["PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM"]
)


def child_env(
    env: dict[str, str] | None, *, home: str | None = None, sandboxed: bool = False
) -> dict[str, str]:
    allowed = BASE_CHILD_ENV | frozenset(settings.LOOP_CHILD_ENV)
    base = {k: v for k, v in os.environ.items() if k in allowed or k.startswith("LC_")}
    if sandboxed:
        from .bwrap import visible_path

        base["PATH"] = visible_path()
        base["TMPDIR"] = "/tmp"
        base["HOME"] = home or "/tmp"
    return {**base, **(env or {})}


def inherited(*names: str) -> dict[str, str]:
    """The worker's values of `names` (read from NAME, or from the file NAME_FILE names),
    for a provider that needs its own key or configuration."""
    found = {}
    for name in names:
        value = secret(name)
        if value:
            found[name] = value
    return found
