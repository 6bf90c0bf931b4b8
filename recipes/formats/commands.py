"""Command files: a node's ``command: NAME`` is the body of ``NAME.md`` in a commands folder."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from recipes.problems import short_repr
from recipes.yaml_reader import MAX_SOURCE_BYTES

__all__ = ["CommandError", "check_name", "commands_recorded", "commands_from", "resolve_command"]


class CommandError(ValueError):
    """A command name that is unsafe, missing, or whose file cannot be used."""


_UNSAFE_COMMAND = re.compile(r"[/\\\x00-\x1f]|\.\.|^\.")


def check_name(name: str, what: str) -> None:
    """Command, script and workflow names are file names: no folders, no '..'."""
    if len(name) > 200:
        raise CommandError(f"{what} name {short_repr(name)} is too long")
    if _UNSAFE_COMMAND.search(name):
        raise CommandError(
            f"unsafe {what} name {short_repr(name)}: names cannot contain '/', '\\' or '..' "
            "and cannot start with '.'"
        )


# A run is fixed at its start: the command files its recipe uses are read once, then, for as
# long as the run lives, its spec is loaded from those texts (runs.executor.spec), so an
# edit reaches new runs at once and never changes, or breaks, a run in flight. The loader
# knows no runs: this is the one place command files are read, so it records or replays.
_snapshot: ContextVar[tuple[dict[str, str], bool] | None] = ContextVar(
    "command_snapshot", default=None
)


def _key(name: str, commands_dirs: Sequence[Path]) -> str:
    return name + "\n" + "\n".join(str(d) for d in commands_dirs)


@contextmanager
def commands_recorded() -> Iterator[dict[str, str]]:
    """Within: every command file read is also put in the dict yielded (a run's snapshot)."""
    bodies: dict[str, str] = {}
    token = _snapshot.set((bodies, False))
    try:
        yield bodies
    finally:
        _snapshot.reset(token)


@contextmanager
def commands_from(bodies: dict[str, str]) -> Iterator[None]:
    """Within: command files come from `bodies` (a run's snapshot), not the disk. A name
    the snapshot lacks (a run started before snapshots were kept) is read from the disk."""
    token = _snapshot.set((bodies, True))
    try:
        yield
    finally:
        _snapshot.reset(token)


def _from_snapshot(name: str, commands_dirs: Sequence[Path]) -> str | None:
    active = _snapshot.get()
    if active is None or not active[1]:
        return None
    bodies = active[0]
    found = bodies.get(_key(name, commands_dirs))
    if found is None:  # the same file under other folder settings
        found = next((b for k, b in bodies.items() if k.split("\n", 1)[0] == name), None)
    return found


def resolve_command(name: str, commands_dirs: Sequence[Path]) -> str:
    """Body of ``<dir>/<name>.md`` from the first directory that has the file (or from the
    run's snapshot, see `commands_from`).

    A file that exists but cannot be used fails closed: later directories are not
    consulted.  Raises :class:`CommandError` with a readable reason.
    """
    check_name(name, "command")
    kept = _from_snapshot(name, commands_dirs)
    if kept is not None:
        return kept
    body = _read_command(name, commands_dirs)
    active = _snapshot.get()
    if active is not None and not active[1]:
        active[0][_key(name, commands_dirs)] = body
    return body


def _read_command(name: str, commands_dirs: Sequence[Path]) -> str:
    if not commands_dirs:
        raise CommandError(
            f"command {short_repr(name)} not found: no commands directories are configured"
        )
    for directory in map(Path, commands_dirs):
        candidate = directory / f"{name}.md"
        try:
            if not candidate.exists():
                continue
            if not candidate.is_file():
                raise CommandError(f"command {short_repr(name)}: {candidate} is not a file")
            if not candidate.resolve().is_relative_to(directory.resolve()):
                raise CommandError(
                    f"command {short_repr(name)}: {candidate} points outside {directory}"
                )
            with candidate.open("rb") as handle:
                data = handle.read(MAX_SOURCE_BYTES + 1)
        except OSError as exc:
            raise CommandError(
                f"command {short_repr(name)}: cannot read {candidate} ({exc.strerror or exc})"
            ) from None
        if len(data) > MAX_SOURCE_BYTES:
            raise CommandError(
                f"command {short_repr(name)}: {candidate} is larger than {MAX_SOURCE_BYTES} bytes"
            )
        try:
            body = data.decode("utf-8")
        except UnicodeDecodeError:
            raise CommandError(
                f"command {short_repr(name)}: {candidate} is not valid UTF-8 text"
            ) from None
        if not body.strip():
            raise CommandError(f"command {short_repr(name)}: {candidate} is empty")
        return body
    searched = ", ".join(str(d) for d in commands_dirs)
    raise CommandError(
        f"command {short_repr(name)} not found ({name}.md); looked in: {searched}; "
        f"create it as {Path(commands_dirs[0]) / (name + '.md')}"
    )
