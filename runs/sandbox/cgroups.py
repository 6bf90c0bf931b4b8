"""A control group of its own for each sandbox, where this machine lets the worker make one.

setrlimit bounds each process, and its process limit (RLIMIT_NPROC) counts every process of
the user — the worker's own threads, every other run's children — and never holds for root.
A cgroup counts only what is in it: with one per sandbox (per `CallSpace`), `processes`
bounds that sandbox's processes and threads, and its memory as a whole is bounded too (its
processes' and its /tmp's pages: Limits.sandbox_memory_mb), while another run's sandbox
starts processes as before.

The cgroup is made in the worker's own cgroup (cgroup v1's `pids` and `memory`
hierarchies, or cgroup v2 where the worker's cgroup hands those controllers down); the
child joins it between fork and exec (`join`, from the preexec function), before
bubblewrap starts, so everything in the sandbox is in it from its first instruction. It is
removed when the space closes; one left behind by a worker that was killed is removed by the
next worker process that makes one. Where no writable cgroup exists (an unprivileged worker
without a delegated cgroup), `processes` falls back to RLIMIT_NPROC (confinement.py).
"""

from __future__ import annotations

import functools
import logging
import os
import re
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)
PREFIX = "loop-sandbox-"
# bubblewrap's own two processes (it and the PID namespace's init), or the unsandboxed
# supervisor: not counted against the step's `processes`.
LAUNCHER_PROCESSES = 2
# limit name → (controller, the limit's file in cgroup v1, in cgroup v2)
CONTROLLED = {
    "processes": ("pids", "pids.max", "pids.max"),
    "memory_mb": ("memory", "memory.limit_in_bytes", "memory.max"),
}


@dataclass(frozen=True)
class _Parent:
    folder: Path  # the worker's own cgroup in that hierarchy
    version: int


@dataclass
class Group:
    """One sandbox's cgroup: a folder per hierarchy, and the limits each one holds."""

    folders: dict[Path, frozenset[str]]

    def join(self) -> frozenset[str]:
        """Put the calling process in the group (in the child, between fork and exec);
        the limits it now holds. Never raises: a limit it could not join falls back."""
        held: set[str] = set()
        pid = str(os.getpid()).encode()
        for folder, limits in self.folders.items():
            try:
                handle = os.open(folder / "cgroup.procs", os.O_WRONLY)
                try:
                    os.write(handle, pid)
                finally:
                    os.close(handle)
            except OSError:
                continue
            held |= limits
        return frozenset(held)

    def remove(self, attempts: int = 60) -> None:
        """Kill what is left in it (a child that double-forked out of its process group)
        and remove it; a folder still busy after `attempts` is left to the next sweep."""
        for folder in self.folders:
            _remove(folder, attempts)
        self.folders = {}


def create(*, processes: int, memory_mb: int) -> Group | None:
    """A new cgroup holding at most `processes` processes and threads (beside the
    launcher's) and `memory_mb` of memory (0: no such limit), or None where the worker
    cannot make one."""
    asked = {"processes": processes, "memory_mb": memory_mb}
    wanted = {name: value for name, value in asked.items() if value}
    parents = _parents()
    if not wanted or not parents:
        return None
    name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    folders: dict[Path, set[str]] = {}
    for limit, value in wanted.items():
        parent = parents.get(CONTROLLED[limit][0])
        if parent is None:
            continue
        _sweep(parent.folder)
        folder = parent.folder / name
        try:
            folder.mkdir(exist_ok=True)
            _write(folder / CONTROLLED[limit][parent.version], _limit_value(limit, value))
        except OSError as exc:
            log.warning("sandbox cgroup %s: %s; `%s` counts per user instead", folder, exc, limit)
            _remove(folder, 1)
            continue
        folders.setdefault(folder, set()).add(limit)
    if not folders:
        return None
    return Group({folder: frozenset(held) for folder, held in folders.items()})


def _limit_value(limit: str, value: int) -> str:
    if limit == "processes":
        return str(value + LAUNCHER_PROCESSES)
    return str(value * 1024 * 1024)


@functools.cache
def _parents() -> dict[str, _Parent]:
    """controller → the worker's own cgroup where a child cgroup can be made and given that
    controller's limit (found once per process)."""
    found: dict[str, _Parent] = {}
    own = _own_cgroups()
    for mount_root, mount_point, fstype, options in _cgroup_mounts():
        for controller in ("pids", "memory"):
            if controller in found:
                continue
            if fstype == "cgroup" and controller in options:
                path, version = own.get(controller), 1
            elif fstype == "cgroup2":
                path, version = own.get(""), 2
            else:
                continue
            if path is None or not path.startswith(mount_root):
                continue
            folder = Path(mount_point) / path[len(mount_root) :].lstrip("/")
            if _usable(folder, controller, version):
                found[controller] = _Parent(folder, version)
    if not found:
        log.info("no writable cgroup: a sandbox's `processes` counts per user (RLIMIT_NPROC)")
    return found


def _usable(folder: Path, controller: str, version: int) -> bool:
    if not os.access(folder, os.W_OK):
        return False
    if version == 1:
        return True
    # cgroup v2 hands a controller to child cgroups only when the parent enables it.
    try:
        return controller in (folder / "cgroup.subtree_control").read_text().split()
    except OSError:
        return False


def _own_cgroups() -> dict[str, str]:
    """controller → this process's cgroup path ("" → its cgroup v2 path)."""
    found: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            found[controller] = path
    return found


def _cgroup_mounts() -> list[tuple[str, str, str, set[str]]]:
    """(root, mount point, type, options) of each cgroup file system this process sees."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        root, point = (_unescape(field) for field in fields[3:5])
        found.append((root, point, tail[0], set(tail[2].split(","))))
    return found


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _sweep(parent: Path) -> None:
    """Remove the cgroups of worker processes that are gone (killed before they could)."""
    try:
        names = [entry.name for entry in parent.iterdir() if entry.name.startswith(PREFIX)]
    except OSError:
        return
    for name in names:
        owner = name[len(PREFIX) :].split("-", 1)[0]
        if owner.isdigit() and not _alive(int(owner)):
            _remove(parent / name, 1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove(folder: Path, attempts: int) -> None:
    for attempt in range(attempts):
        try:
            for pid in (folder / "cgroup.procs").read_text().split():
                _kill(int(pid))
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if attempt + 1 < attempts:
                time.sleep(0.05)  # busy until its last process has exited


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def _write(path: Path, value: str) -> None:
    with open(path, "w", encoding="ascii") as handle:
        handle.write(value)
