"""What a child process may see and use: its workspace, the network, its resources.

A `Confinement` is the policy, built by whoever starts the process (a bash step, a gate
command, an agent call) with `for_run`; `runs.sandbox.process.run_process` enforces it
through bubblewrap (runs/sandbox/bwrap.py). The rules in one place:

- the workspace (the step's working folder) is read-write, or read-only for a role that
  must not write; a git repository's metadata inside it is never writable (see bwrap.py);
- the run's artifacts folder and the run's own home folder (`HOME`, where agent CLIs keep
  their sessions between iterations) are read-write;
- nothing else of the data folder is visible: not other runs, not the database or broker.
"""

from __future__ import annotations

import resource
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

from django.conf import settings

# The resource limits a recipe may ask for, each at most the administrator's.
LIMIT_NAMES = ("cpu_seconds", "memory_mb", "processes", "file_mb")
MB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """What the child and everything it starts may use (0: the administrator's).

    - cpu_seconds: each process's CPU time (RLIMIT_CPU);
    - memory_mb: each process's data (RLIMIT_DATA); each of the sandbox's memory-backed
      /tmp, /var/tmp and /run holds at most this much (`tmp_mb`); where the sandbox has a
      cgroup of its own (cgroups.py), all of it together at most this plus what its /tmp
      may hold (`sandbox_memory_mb`);
    - processes: the sandbox's processes and threads (its cgroup's pids.max), else, where
      no cgroup can be made, the user's (RLIMIT_NPROC: every process of the worker's user,
      and never for root);
    - file_mb: the largest file a process may write (RLIMIT_FSIZE).
    """

    cpu_seconds: int = 0
    memory_mb: int = 0
    processes: int = 0
    file_mb: int = 0

    @classmethod
    def from_options(cls, options: dict | None) -> Limits:
        options = options or {}
        return cls(**{name: int(options.get(name) or 0) for name in LIMIT_NAMES})

    def effective(self) -> dict[str, int]:
        """Each limit: the recipe's when it asked for less, else the administrator's."""
        maximum = administrator_limits()
        return {name: _at_most(getattr(self, name), maximum[name]) for name in LIMIT_NAMES}

    def tmp_mb(self) -> int:
        """What each of the sandbox's memory-backed folders may hold: their pages are
        memory that no rlimit counts, so at most the memory limit and LOOP_SANDBOX_TMP_MB
        (0: neither is set)."""
        sizes = [mb for mb in (self.effective()["memory_mb"], settings.LOOP_SANDBOX_TMP_MB) if mb]
        return min(sizes) if sizes else 0

    def sandbox_memory_mb(self) -> int:
        """The whole sandbox's memory (its cgroup's limit): the memory limit for its
        processes plus what its /tmp may hold, so a full /tmp says "no space left" rather
        than the kernel killing the step; 0 without a memory limit."""
        memory = self.effective()["memory_mb"]
        return memory + self.tmp_mb() if memory else 0

    def apply(self, *, held_by_cgroup: frozenset[str] = frozenset()) -> None:
        """In the child, between fork and exec (a preexec function). `held_by_cgroup`: the
        limits the sandbox's cgroup already holds, whose per-user rlimit is then not set."""
        limits = self.effective()
        if limits["cpu_seconds"]:
            seconds = limits["cpu_seconds"]
            # SIGXCPU at the soft limit, SIGKILL a little later if the process ignores it.
            resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 5))
        if limits["memory_mb"]:
            # The data segment, not the address space: JavaScript runtimes reserve far more
            # address space than they ever use and would not start under RLIMIT_AS.
            size = limits["memory_mb"] * MB
            resource.setrlimit(resource.RLIMIT_DATA, (size, size))
        if limits["processes"] and "processes" not in held_by_cgroup:
            count = limits["processes"]
            resource.setrlimit(resource.RLIMIT_NPROC, (count, count))
        if limits["file_mb"]:
            size = limits["file_mb"] * MB
            resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))


def _at_most(asked: int, allowed: int) -> int:
    """The recipe's limit, at most the administrator's (0 on either side: none there)."""
    return min(asked, allowed) if asked and allowed else asked or allowed


def administrator_limits() -> dict[str, int]:
    return {
        "cpu_seconds": settings.LOOP_SANDBOX_CPU_SECONDS,
        "memory_mb": settings.LOOP_SANDBOX_MEMORY_MB,
        "processes": settings.LOOP_SANDBOX_PROCESSES,
        "file_mb": settings.LOOP_SANDBOX_FILE_MB,
    }


@dataclass(frozen=True)
class Confinement:
    workdir: str
    writable: bool = True
    network: bool = False
    # Further folders of the run the child reads and writes (its artifacts).
    write: tuple[str, ...] = ()
    # Further folders it reads: the program's own files (an agent CLI's package).
    read: tuple[str, ...] = ()
    # The child's HOME (read-write); None: an empty private one that lasts one process.
    home: str | None = None
    limits: Limits = field(default_factory=Limits)
    # The run the process works for: its event log says so when no sandbox was used.
    run_id: int | None = None
    # The person's repository when the workspace is a worktree they made
    # (repository.layout_of finds its git folders from the repository's side).
    repository: str | None = None

    def with_network(self, network: bool) -> Confinement:
        return replace(self, network=network)


def step_network(*chosen: bool | None) -> bool:
    """Whether a step may use the network: the first of `chosen` that says (a node's, then
    its recipe's `network:`), else the administrator's LOOP_SANDBOX_NETWORK."""
    for value in chosen:
        if value is not None:
            return value
    return settings.LOOP_SANDBOX_NETWORK == "on"


def agent_network(node_network: bool | None) -> bool:
    """Agents reach their model's API unless their own node says `network: none`."""
    return True if node_network is None else node_network


def limits_of(*chosen: dict | None) -> Limits:
    """A recipe's `limits:` with a node's replacing them one by one (recipe first)."""
    merged: dict = {}
    for limits in chosen:
        merged.update(limits or {})
    return Limits.from_options(merged)


def run_folder(run_id: int) -> Path:
    return Path(settings.LOOP_DATA_DIR) / "runs" / str(run_id)


def home_folder(run_id: int) -> Path:
    """The run's own HOME: agent CLIs keep their configuration and sessions there, so a
    threaded loop's next iteration resumes what the last one left; no other run sees it."""
    home = run_folder(run_id) / "home"
    if not home.is_dir():
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        _copy_home_files(home)
    return home


def _copy_home_files(home: Path) -> None:
    """LOOP_SANDBOX_HOME_COPY: files of the worker's HOME (an agent CLI's login, such as
    `.claude/.credentials.json`) copied into a new run home; a copy, so no run can change
    the worker's own."""
    source = Path.home()
    for name in settings.LOOP_SANDBOX_HOME_COPY:
        origin = source / name
        if not origin.is_file() or not _within_folder(origin, source):
            continue
        target = home / name
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        shutil.copyfile(origin, target)
        target.chmod(0o600)


def _within_folder(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def for_run(
    run_id: int | None,
    workdir: str | Path,
    *,
    writable: bool = True,
    network: bool = False,
    limits: Limits | None = None,
    read: tuple[str, ...] = (),
    write: tuple[str, ...] = (),
    repository: str | None = None,
) -> Confinement:
    """The confinement of a process working for `run_id` in `workdir`."""
    home = None
    if run_id is not None:
        artifacts = run_folder(run_id) / "artifacts"
        artifacts.mkdir(parents=True, exist_ok=True)
        write = (str(artifacts), *write)
        home = str(home_folder(run_id))
    return Confinement(
        workdir=str(workdir),
        writable=writable,
        network=network,
        write=write,
        read=read,
        home=home,
        limits=limits or Limits(),
        run_id=run_id,
        repository=repository,
    )
