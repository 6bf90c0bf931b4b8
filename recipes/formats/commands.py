"""Command files: a node's ``command: NAME`` is the body of ``NAME.md`` in a commands folder."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path

from recipes.formats import snapshot
from recipes.problems import short_repr
from recipes.yaml_reader import MAX_SOURCE_BYTES

__all__ = ["CommandError", "check_name", "resolve_command"]


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


def _key(name: str, commands_dirs: Sequence[Path]) -> str:
    return name + "\n" + "\n".join(str(d) for d in commands_dirs)


def resolve_command(name: str, commands_dirs: Sequence[Path]) -> str:
    """Body of ``<dir>/<name>.md`` from the first directory that has the file (or from the
    run's snapshot: recipes.formats.snapshot).

    A file that exists but cannot be used fails closed: later directories are not
    consulted.  Raises :class:`CommandError` with a readable reason.
    """
    check_name(name, "command")
    key = _key(name, commands_dirs)
    body = snapshot.kept("commands", key, name=name)
    if body is None:
        body = _read_command(name, commands_dirs)
        snapshot.keep("commands", key, body)
    return body


def usable_entry(candidate: Path, directory: Path, what: str) -> bool:
    """Whether `directory` has a usable file `candidate` (False: no entry of that name, so
    a later folder may be consulted). An entry that exists but cannot be used fails closed,
    raising CommandError: a link (these folders may be an agent's work: no link in them is
    followed), something not a regular file (a folder, a FIFO). The one rule for command
    files and named scripts; the file itself is then read without following a link
    (`runs.sandbox.files.read_file`)."""
    try:
        mode = candidate.lstat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return False
    if stat.S_ISLNK(mode):
        if not candidate.exists():
            problem = "a link that leads nowhere (to {}: missing, or a loop of links)"
        elif not candidate.resolve().is_relative_to(Path(directory).resolve()):
            problem = "a link that points outside " + str(directory) + " (to {})"
        else:
            problem = "a link (to {}), and links here are not followed: put the file itself there"
        raise CommandError(
            f"{what}: {candidate} is {problem.format(os.readlink(candidate))}; fix or remove "
            "it (a folder that has the name is never passed over for a later one)"
        )
    if not stat.S_ISREG(mode):
        raise CommandError(f"{what}: {candidate} is not a file")
    return True


def _read_command(name: str, commands_dirs: Sequence[Path]) -> str:
    if not commands_dirs:
        raise CommandError(
            f"command {short_repr(name)} not found: no commands directories are configured"
        )
    for directory in map(Path, commands_dirs):
        candidate = directory / f"{name}.md"
        try:
            if not usable_entry(candidate, directory, f"command {short_repr(name)}"):
                continue
            from runs.sandbox import files

            data = files.read_file(directory, candidate.name, limit=MAX_SOURCE_BYTES + 1).data
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
