"""One child process's place: its confinement, its private folder, and who it is.

An agent call needs files the CLI reads (its MCP configuration, an output schema) and the
console's tool socket; they live in a private folder that only this call's sandbox sees
(at /run/loop inside). `CallSpace.write` puts a file there and answers with the path the
child must use. Once the child has started, `owns(pid)` tells whether a process is the
child or one of its descendants: the tool server asks it of every connection
(SO_PEERCRED), so another run's agent cannot use a stolen token.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path

from . import bwrap, cgroups, repository
from .confinement import Confinement
from .mode import use_sandbox

RELAY = Path(__file__).resolve().parent.parent / "agent_tools" / "relay"


class CallSpace:
    def __init__(self, confinement: Confinement):
        self.confinement = confinement
        self.sandboxed = use_sandbox()
        self._folder: str | None = None
        self._launcher: int | None = None
        self._started = threading.Event()
        # Descriptors of folders bubblewrap mounts by descriptor (`--bind-fd`): open from
        # `command` until the child has started, so no path is looked up twice.
        self.fds: list[int] = []
        # The sandbox's own cgroup (cgroups.py), made when its first process starts.
        self._cgroup: cgroups.Group | None = None
        self._cgroup_made = False

    # --- the private folder ----------------------------------------------------------------
    @property
    def folder(self) -> str:
        """Made on first use: a fresh 0700 folder (a short path: a unix socket lives in it)."""
        if self._folder is None:
            self._folder = tempfile.mkdtemp(prefix="loop-call-")
            os.chmod(self._folder, 0o700)
        return self._folder

    def inside(self, name: str) -> str:
        """The path the child uses for the file `name` of the private folder."""
        if self.sandboxed:
            return f"{bwrap.CALL_FOLDER}/{name}"
        return os.path.join(self.folder, name)

    def write(self, name: str, text: str) -> str:
        """A private file (0600) the child can read; returns the child's path to it."""
        handle = os.open(
            os.path.join(self.folder, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600
        )
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        return self.inside(name)

    def relay_path(self, name: str) -> str:
        """A module of the tools relay (runs/agent_tools/relay/) as the child finds it."""
        if self.sandboxed:
            return f"{bwrap.RELAY_FOLDER}/{name}"
        return str(RELAY / name)

    def close(self) -> None:
        self.close_fds()
        if self._cgroup is not None:
            self._cgroup.remove()
            self._cgroup = None
        if self._launcher is not None and self.confinement.writable:
            # What the child may have planted in a person's `.git` for their own git.
            repository.tidy_git_folder(self.confinement.workdir)
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def __enter__(self) -> CallSpace:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- the child -------------------------------------------------------------------------
    def command(self, argv: list[str]) -> list[str]:
        if not self.sandboxed:
            return argv
        return bwrap.command(
            argv, self.confinement, call_folder=self._folder, relay=str(RELAY), fds=self.fds
        )

    def cgroup(self) -> cgroups.Group | None:
        """The cgroup every process of this space joins (None where none can be made)."""
        if not self._cgroup_made:
            self._cgroup_made = True
            limits = self.confinement.limits
            self._cgroup = cgroups.create(
                processes=limits.effective()["processes"], memory_mb=limits.sandbox_memory_mb()
            )
        return self._cgroup

    def started(self, pid: int) -> None:
        self._launcher = pid
        self._started.set()

    def close_fds(self) -> None:
        while self.fds:
            os.close(self.fds.pop())

    def owns(self, pid: int | None, *, wait: float = 10.0) -> bool:
        """Whether `pid` (in the worker's PID namespace) is the launched child or descends
        from it."""
        if not pid or not self._started.wait(wait):
            return False
        seen = 0
        while pid > 1 and seen < 4096:
            if pid == self._launcher:
                return True
            pid = _parent_of(pid)
            seen += 1
        return False


def _parent_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            # The command name (field 2) may hold spaces and parentheses: read after its end.
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0
    return int(fields[1])
