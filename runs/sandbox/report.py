"""What people are told when steps and agents run without the sandbox.

The workers know (each writes its runs.sandbox.SandboxStatus beside its heartbeat); the
web process only reports. Before any worker has reported, the web process's own probe
stands in (the embedded default runs both on one machine).
"""

from __future__ import annotations

import logging
import time

from .mode import status

log = logging.getLogger(__name__)
CACHE_SECONDS = 10
_cache: tuple[float, list[tuple[str, str]]] | None = None


def unsandboxed() -> list[tuple[str, str]]:
    """(where, why) for each place children run unsandboxed: a worker's name, or "this
    machine" when no worker has reported yet. Cached for a few seconds: every staff page
    asks."""
    global _cache
    now = time.monotonic()
    if _cache is not None and now - _cache[0] < CACHE_SECONDS:
        return _cache[1]
    from runs.executor import heartbeat

    try:
        states = heartbeat.sandbox_states()
    except Exception as exc:  # noqa: BLE001 - the page renders without the broker
        log.warning("sandbox states unavailable: %s", exc)
        states = {}
    if states:
        found = [(n, s.get("detail", "")) for n, s in sorted(states.items()) if not s.get("active")]
    else:
        own = status()
        found = [] if own.active else [("this machine", own.detail)]
    _cache = (now, found)
    return found


def banner() -> str:
    """The staff banner's text, "" when every worker sandboxes its children."""
    found = unsandboxed()
    if not found:
        return ""
    where = "; ".join(f"{name}: {why}" for name, why in found)
    return (
        "Steps and agents run without a sandbox, with the worker's own access to this "
        f"machine ({where}). See docs/security.md, The sandbox."
    )
