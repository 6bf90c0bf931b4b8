"""A run is fixed at its start: the files its recipe reads besides its own text (command
files, included workflows) are read once when it starts, then, for as long as the run
lives, its spec loads from those texts (runs.executor.spec), never the disk. An edit
reaches new runs at once and never changes, or breaks, a run in flight.

The loader knows no runs: the two places that read such files (recipes.formats.commands,
loops.workflow.include) ask here first, and tell here what they read.

A snapshot is plain JSON: `{"commands": {key: body}, "workflows": {name: {"path", "source"}}}`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# (the snapshot, whether it is being replayed rather than recorded)
_active: ContextVar[tuple[dict, bool] | None] = ContextVar("recipe_snapshot", default=None)


@contextmanager
def recording() -> Iterator[dict]:
    """Within: every command file and included workflow read is also put in the snapshot
    yielded (empty kinds are dropped on the way out)."""
    snapshot: dict = {"commands": {}, "workflows": {}}
    token = _active.set((snapshot, False))
    try:
        yield snapshot
    finally:
        _active.reset(token)
        for kind in [k for k, v in snapshot.items() if not v]:
            del snapshot[kind]


@contextmanager
def replaying(snapshot: dict) -> Iterator[None]:
    """Within: what `snapshot` holds is read from it, not the disk. What it lacks (a run
    started before snapshots were kept) is read from the disk."""
    token = _active.set((snapshot, True))
    try:
        yield
    finally:
        _active.reset(token)


def kept(kind: str, key: str, *, name: str = ""):
    """What the replayed snapshot holds under `key` (or, failing that, the first entry of
    that `name`: the same file under other folder settings); None when not replaying."""
    active = _active.get()
    if active is None or not active[1]:
        return None
    entries = active[0].get(kind) or {}
    found = entries.get(key)
    if found is None and name:
        found = next((v for k, v in entries.items() if k.split("\n", 1)[0] == name), None)
    return found


def keep(kind: str, key: str, value) -> None:
    """Put what was read from the disk into the snapshot being recorded, if any."""
    active = _active.get()
    if active is not None and not active[1]:
        active[0].setdefault(kind, {})[key] = value
