"""Whether child processes run sandboxed here: `LOOP_SANDBOX` and what this machine allows.

    auto      sandbox when bubblewrap works on this machine, else run unsandboxed and say so
    required  refuse to start a child process without the sandbox
    off       never sandbox (say so everywhere, like auto without bubblewrap)

Whether bubblewrap works is decided once per process (per setting), by starting it the way
every child will be started (`isolation()`: its own user namespace with no capabilities,
new PID, IPC and network namespaces, a size-bounded /tmp); the answer, with the reason when
it does not, is what the worker's start-up log, the staff banner, /healthz and /metrics
show. The bubblewrap found then is the one every child starts with: it is never looked up
again, so one that disappears later fails the step (SandboxUnavailable, process.py) rather
than letting steps run unsandboxed while every surface says they do not.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass

from django.conf import settings

from runs.providers.base import ProviderError

MODES = ("auto", "required", "off")
INSTALL_HINT = "install bubblewrap (Debian and Ubuntu: apt-get install bubblewrap)"


class SandboxUnavailable(ProviderError):
    """LOOP_SANDBOX=required and bubblewrap cannot run here, or the bubblewrap this worker
    decided on can no longer be started: the step or agent call fails with this message
    (every kind already reports a ProviderError that way)."""


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


@dataclass(frozen=True)
class _Probe:
    works: bool
    detail: str
    program: str | None = None  # the bubblewrap every child starts with
    isolation: tuple[str, ...] = ()  # the namespace and privilege flags it accepted


def probe() -> tuple[bool, str]:
    """(works, "bubblewrap X" or why not): asked once per process (per LOOP_SANDBOX_BWRAP)."""
    found = _probed(settings.LOOP_SANDBOX_BWRAP)
    return found.works, found.detail


def bwrap_path() -> str | None:
    """The bubblewrap this process decided on (LOOP_SANDBOX_BWRAP, else `bwrap` on the
    worker's PATH, as found then)."""
    return _probed(settings.LOOP_SANDBOX_BWRAP).program


def isolation() -> list[str]:
    """How every child starts (bwrap.command), exactly as the probe started it (the
    strictest set where bubblewrap did not start at all)."""
    return list(_probed(settings.LOOP_SANDBOX_BWRAP).isolation or _isolations()[0])


def _isolations() -> list[tuple[str, ...]]:
    """The flags every child gets, strictest first; the probe keeps the first set this
    machine's bubblewrap accepts. Always a user namespace of its own and no capabilities,
    not even in its bounding set: a root worker's child would otherwise keep every
    capability of the host (open_by_handle_at reads any file). Its uid inside is the
    worker's own (bubblewrap maps that one uid): a root worker's child is uid 0 without any
    capability, which agent CLIs that check their files are root's (Gemini's system
    settings) need; as `nobody` it would gain nothing, since the kernel checks the same
    outside uid either way. `--disable-userns` (bubblewrap 0.8) keeps the child from making
    user namespaces of its own."""
    strict = (
        *("--die-with-parent", "--new-session", "--unshare-user", "--cap-drop", "ALL"),
        *("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"),
    )
    found = [(*strict, "--disable-userns"), strict]
    if os.geteuid() != 0:
        # A setuid bubblewrap where user namespaces are off: it drops every privilege itself.
        found.append(tuple(flag.replace("--unshare-user", "--unshare-user-try") for flag in strict))
    return found


@functools.cache
def _probed(configured: str) -> _Probe:
    program = shutil.which(configured or "bwrap")
    if program is None:
        return _Probe(False, f"bubblewrap is not installed; {INSTALL_HINT}")
    why = ""
    try:
        version = _run([program, "--version"]).stdout.strip()
        for flags in _isolations():
            tried = _run(
                [
                    program,
                    *("--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"),
                    *("--size", str(1024 * 1024), "--tmpfs", "/tmp", "--unshare-net"),
                    *flags,
                    "true",
                ]
            )
            if tried.returncode == 0:
                return _Probe(True, version or "bubblewrap", program, flags)
            why = (tried.stderr.strip().splitlines() or [f"exit status {tried.returncode}"])[-1]
    except (OSError, subprocess.SubprocessError) as exc:
        return _Probe(False, f"bubblewrap could not be started: {exc}")
    return _Probe(
        False,
        f"bubblewrap cannot create namespaces on this machine ({why}); a container may "
        "need user namespaces allowed, or run the worker where they are",
    )


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, env={})


def status() -> SandboxStatus:
    mode = settings.LOOP_SANDBOX
    if mode == "off":
        return SandboxStatus(False, mode, "LOOP_SANDBOX=off")
    works, detail = probe()
    return SandboxStatus(works, mode, detail)


def use_sandbox() -> bool:
    """Whether the next child process starts in the sandbox (as decided once: `status`);
    SandboxUnavailable when it must and cannot."""
    current = status()
    if current.active:
        return True
    if current.mode == "required":
        raise SandboxUnavailable(
            f"LOOP_SANDBOX=required, and {current.detail}: no step or agent starts "
            "without the sandbox"
        )
    return False


def cannot_start(program: str, exc: OSError) -> SandboxUnavailable:
    """The error of a step whose bubblewrap, found when this worker decided to sandbox,
    cannot be started now: never a silent fallback to running unsandboxed."""
    return SandboxUnavailable(
        f"the sandbox's bubblewrap ({program}) cannot be started: {exc.strerror or exc}. This "
        "worker decided at its start that steps and agents run sandboxed and says so on "
        "every surface, so nothing runs without it: restore bubblewrap, or restart the "
        "worker to decide again"
    )
