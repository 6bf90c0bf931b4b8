"""Whether child processes run sandboxed here: `LOOP_SANDBOX` and what this machine allows.

    auto      sandbox when bubblewrap works on this machine, else run unsandboxed and say so
    required  refuse to start a child process without the sandbox
    off       never sandbox (say so everywhere, like auto without bubblewrap)

Whether bubblewrap works is found out once per process, by starting it the way every child
will be started (new PID, IPC and network namespaces); the answer, with the reason when it
does not, is what the worker's start-up log, the staff banner, /healthz and /metrics show.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from dataclasses import dataclass

from django.conf import settings

from runs.providers.base import ProviderError

MODES = ("auto", "required", "off")
INSTALL_HINT = "install bubblewrap (Debian and Ubuntu: apt-get install bubblewrap)"


class SandboxUnavailable(ProviderError):
    """LOOP_SANDBOX=required, and bubblewrap cannot run here: the step or agent call fails
    with this message (every kind already reports a ProviderError that way)."""


@dataclass(frozen=True)
class SandboxStatus:
    active: bool
    mode: str
    detail: str  # "bubblewrap 0.8.0", or why children run unsandboxed

    @property
    def summary(self) -> str:
        if self.active:
            return f"sandboxed ({self.detail})"
        return f"NOT sandboxed: {self.detail}"


def probe() -> tuple[bool, str]:
    """(works, "bubblewrap X" or why not), asked once per process (per launcher)."""
    return _probe(bwrap_path())


@functools.cache
def _probe(program: str | None) -> tuple[bool, str]:
    if program is None:
        return False, f"bubblewrap is not installed; {INSTALL_HINT}"
    try:
        version = subprocess.run(
            [program, "--version"], capture_output=True, text=True, timeout=10, env={}
        ).stdout.strip()
        tried = subprocess.run(
            [
                program,
                *("--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"),
                *("--unshare-pid", "--unshare-ipc", "--unshare-net", "--die-with-parent"),
                "true",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            env={},
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return False, f"bubblewrap could not be started: {exc}"
    if tried.returncode != 0:
        why = (tried.stderr.strip().splitlines() or [f"exit status {tried.returncode}"])[-1]
        return False, (
            f"bubblewrap cannot create namespaces on this machine ({why}); a container may "
            "need user namespaces allowed, or run the worker where they are"
        )
    return True, version or "bubblewrap"


def bwrap_path() -> str | None:
    """LOOP_SANDBOX_BWRAP, else `bwrap` on the worker's PATH."""
    return shutil.which(settings.LOOP_SANDBOX_BWRAP or "bwrap")


def status() -> SandboxStatus:
    mode = settings.LOOP_SANDBOX
    if mode == "off":
        return SandboxStatus(False, mode, "LOOP_SANDBOX=off")
    works, detail = probe()
    return SandboxStatus(works, mode, detail)


def use_sandbox() -> bool:
    """Whether the next child process starts in the sandbox; SandboxUnavailable when it
    must and cannot."""
    current = status()
    if current.active:
        return True
    if current.mode == "required":
        raise SandboxUnavailable(
            f"LOOP_SANDBOX=required, and {current.detail}: no step or agent starts "
            "without the sandbox"
        )
    return False
