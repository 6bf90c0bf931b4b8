"""Files the console reads or writes in places an agent can write.

A step or an agent in the sandbox (bwrap.py) writes its workspace, the run's artifacts
folder and the run's HOME. The console itself (the worker outside the sandbox, the web
process) must take whatever it finds there as hostile: any name may have become a symbolic
link (to a secret the worker can read, or to a file the worker can write), a FIFO (an
`open` that never returns, inside a database transaction), a device, or a huge sparse file.
So the console opens a file in those places only through here:

- the path is walked from a folder the caller trusts (the workspace, the run's folder), one
  name at a time relative to the descriptor of the folder before it, never following a
  symbolic link (O_NOFOLLOW, and O_DIRECTORY for folders) and never leaving that folder (a
  `..` or an absolute name is refused);
- the file is opened O_NONBLOCK (a FIFO cannot block the open) and checked with fstat on
  the open descriptor: anything but a regular file is refused (`Refused`, whose message
  says what it was);
- a read takes at most the caller's cap (the start or the end of the file) and says
  whether the file was longer;
- a write creates or truncates only a regular file (O_CREAT|O_TRUNC|O_NOFOLLOW).

The console's own files about a run (gate logs, spilled outputs) live in the run's data
folder, which no sandbox mounts, and are written through here all the same.
"""

from __future__ import annotations

import codecs
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

# Folders on the way are opened without following a link; `O_PATH` is not enough to
# refuse one, so they are opened for reading (a folder's open never blocks).
FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
# An open that met a link (ELOOP), a non-folder on the way (ENOTDIR), a FIFO without a
# writer opened for writing (ENXIO): said as what the name is.
REFUSING_ERRORS = (errno.ELOOP, errno.ENOTDIR, errno.ENXIO, errno.EISDIR)


class Refused(OSError):
    """A name the console will not open: its message says why, for a prompt or a page."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


class Outside(Refused):
    """A name that would leave the folder it is read from (absolute, or with `..`)."""


@dataclass(frozen=True)
class Read:
    """What a capped read took of a file: `data`, and the file's whole `size`."""

    data: bytes
    size: int
    end: bool = False  # the data is the file's end (else its start)

    @property
    def cut(self) -> bool:
        return self.size > len(self.data)

    def text(self) -> str:
        """The data as text; a character cut in two at the cut is left out, not garbled."""
        data = self.data
        if self.cut and self.end:
            data = _without_leading_continuation(data)
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        return decoder.decode(data, final=not (self.cut and not self.end))


def read_file(folder: str | Path, name: str | Path, *, limit: int, end: bool = False) -> Read:
    """At most `limit` bytes of the regular file `name` under `folder`: its start, or its
    end with `end`. `folder` is trusted (links in it are followed); nothing below it is.

    Raises FileNotFoundError when there is no such file, `Outside` / `Refused` when the
    name leaves the folder or is not a regular file, OSError otherwise."""
    fd = open_file(folder, name)
    with os.fdopen(fd, "rb") as file:
        return read_open(file, limit=limit, end=end)


def read_open(file: BinaryIO, *, limit: int, end: bool = False) -> Read:
    """`read_file` on a file already open (one the console itself wrote)."""
    file.flush()
    size = os.fstat(file.fileno()).st_size
    start = max(0, size - limit) if end else 0
    file.seek(start)
    data = file.read(limit)
    return Read(data, max(size, start + len(data)), end=end)


def open_file(folder: str | Path, name: str | Path) -> int:
    """A read-only descriptor of the regular file `name` under `folder` (see `read_file`)."""
    parent, last = _walk(folder, name)
    try:
        _refuse_unless_regular(parent, last, name)  # before opening: a device is not opened
        fd = _open_at(parent, last, os.O_RDONLY | FILE_FLAGS, name)
    finally:
        os.close(parent)
    return _regular(fd, name)


def create_file(folder: str | Path, name: str | Path, mode: int = 0o600) -> BinaryIO:
    """The regular file `name` under `folder`, created or emptied, open for reading and
    writing (binary). Refused if it is a link, a FIFO, a folder or a device."""
    parent, last = _walk(folder, name)
    try:
        if _kind_at(parent, last) is not None:  # an existing one: not emptied unless regular
            _refuse_unless_regular(parent, last, name)
        flags = os.O_RDWR | os.O_CREAT | os.O_TRUNC | FILE_FLAGS
        fd = _open_at(parent, last, flags, name, mode=mode)
    finally:
        os.close(parent)
    return os.fdopen(_regular(fd, name), "w+b")


def write_file(folder: str | Path, name: str | Path, data: bytes, mode: int = 0o644) -> None:
    """Replace the contents of the regular file `name` under `folder` with `data`."""
    with create_file(folder, name, mode=mode) as file:
        file.write(data)


def describe(exc: OSError) -> str:
    """Why a file was not read, in words for a prompt or a page."""
    return exc.strerror or str(exc)


# --- inside ------------------------------------------------------------------------------


def _parts(name: str | Path) -> list[str]:
    path = PurePosixPath(name)
    parts = [part for part in path.parts if part != "."]
    if path.is_absolute() or ".." in parts:
        raise Outside(errno.EPERM, f"{name} leaves the folder it is read from")
    if not parts:
        raise Refused(errno.EINVAL, f"{name!r} names no file")
    return parts


def _walk(folder: str | Path, name: str | Path) -> tuple[int, str]:
    """A descriptor of the folder that holds `name`'s last part, and that part."""
    parts = _parts(name)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            following = _open_at(fd, part, FOLDER_FLAGS, f"{part} (in {name})", "a folder")
            os.close(fd)
            fd = following
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]


def _open_at(
    folder_fd: int, part: str, flags: int, shown, wanted: str = "a regular file", mode=0o600
) -> int:
    try:
        return os.open(part, flags, mode, dir_fd=folder_fd)
    except OSError as exc:
        if exc.errno not in REFUSING_ERRORS:
            raise
        kind = _kind_at(folder_fd, part) or "gone"
        raise Refused(exc.errno, f"{shown} is {kind}, not {wanted}: not opened") from None


def _kind_at(folder_fd: int, part: str) -> str | None:
    try:
        found = os.stat(part, dir_fd=folder_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return _kind(found.st_mode)


def _refuse_unless_regular(folder_fd: int, part: str, name) -> None:
    try:
        found = os.stat(part, dir_fd=folder_fd, follow_symlinks=False)
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, "no such file", str(name)) from None
    _check_regular(found, name)


def _regular(fd: int, name) -> int:
    """`fd` if what was opened is a regular file, whatever changed since it was looked at."""
    try:
        _check_regular(os.fstat(fd), name)
    except Refused:
        os.close(fd)
        raise
    return fd


def _check_regular(found: os.stat_result, name) -> None:
    if not stat.S_ISREG(found.st_mode):
        raise Refused(
            errno.EPERM, f"{name} is {_kind(found.st_mode)}, not a regular file: not opened"
        )


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((words for test, words in kinds if test(mode)), "a regular file")


def _without_leading_continuation(data: bytes) -> bytes:
    """An end read may start inside a character: drop its continuation bytes (at most 3)."""
    skip = 0
    while skip < min(3, len(data)) and 0x80 <= data[skip] <= 0xBF:
        skip += 1
    return data[skip:]
