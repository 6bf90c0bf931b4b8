"""The bubblewrap command line for one child process: what it sees, nothing more.

The sandbox starts from an empty root and gets, in this order (a later mount covers an
earlier one):

1. the system, read-only: /usr (and /bin, /lib… as the host has them), /etc, /opt, the
   Python this console runs on and its virtualenv (the agent tools' relay, `script:`
   nodes without uv), the folders of the worker's PATH, the administrator's
   LOOP_SANDBOX_READ; private /tmp, /run and /var/tmp, its own /proc (its own processes
   only) and a minimal /dev;
2. hidden again where they fall inside those: the data folder, the console's checkout, the
   files the console reads its secrets from, the host's password and key files, the
   administrator's LOOP_SANDBOX_HIDE;
3. its own: the workspace (read-write or read-only), the run's artifacts and HOME, the
   administrator's LOOP_SANDBOX_WRITE, the call's private folder at /run/loop (its tool
   socket and token) and the tools relay at /run/loop-tools;
4. a repository's git configuration, hooks, `info` and submodule folders read-only: an
   agent may edit files, add and commit, but never plant something a person's or the
   console's own git would run later.

New PID, IPC, UTS and cgroup namespaces always; a new network namespace (loopback only)
unless the confinement allows the network. The child dies with the worker.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from django.conf import settings

from .confinement import Confinement
from .mode import bwrap_path

# Where the call's private folder and the tools relay appear inside.
CALL_FOLDER = "/run/loop"
RELAY_FOLDER = "/run/loop-tools"
SYSTEM_DIRS = ("/usr", "/etc", "/opt")
TOP_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Files of the host that hold passwords or private keys (readable by a root worker).
HOST_SECRETS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssl/private",
    "/etc/ssh",
)
# What git runs or reads as instructions: never writable from inside a sandbox.
GIT_PROTECTED_FOLDERS = ("hooks", "info", "modules")


def command(
    argv: list[str], confinement: Confinement, *, call_folder: str | None, relay: str | None
) -> list[str]:
    args = [
        bwrap_path() or "bwrap",
        "--die-with-parent",
        "--new-session",
        *("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"),
    ]
    if not confinement.network:
        args.append("--unshare-net")
    readable = _read_only_extras()
    args += _system()
    for folder in readable:
        args += ["--ro-bind-try", folder, folder]
    args += _hidden([*SYSTEM_DIRS, *readable])
    # The console's virtualenv lives in its checkout, which step 2 may have hidden.
    if sys.prefix != sys.base_prefix:
        args += ["--ro-bind", sys.prefix, sys.prefix]
    args += _own(confinement, call_folder, relay)
    args += ["--chdir", confinement.workdir, "--"]
    # Through env(1), a program that is missing or not executable exits 127 or 126, as it
    # would from a shell (bubblewrap itself would exit 1).
    if "=" not in argv[0]:
        args += ["/usr/bin/env", "--"]
    return args + argv


def _system() -> list[str]:
    args: list[str] = []
    for top in TOP_LINKS:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for folder in SYSTEM_DIRS:
        if os.path.isdir(folder):
            args += ["--ro-bind", folder, folder]
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--tmpfs", "/tmp", "--tmpfs", "/run", "--tmpfs", "/var/tmp"]
    resolver = Path("/etc/resolv.conf")
    if resolver.is_symlink():  # e.g. systemd-resolved's file under /run
        target = resolver.resolve().parent
        args += ["--ro-bind-try", str(target), str(target)]
    return args


def _read_only_extras() -> list[str]:
    """The Python this console runs on, the worker's PATH folders, and what the
    administrator allows. Never the data folder or the checkout (the console's virtualenv
    is bound on its own), nor a PATH folder inside the worker's HOME (its tools there, like
    pyenv's shims, need the rest of that HOME, which holds the worker's own credentials)."""
    found: list[str] = []
    for entry in [sys.base_prefix, *settings.LOOP_SANDBOX_READ]:
        if os.path.isdir(entry) and not _covered(Path(entry), SYSTEM_DIRS + TOP_LINKS):
            found.append(entry)
    for entry in _path_folders():
        if entry not in found:
            found.append(entry)
    return found


def _path_folders() -> list[str]:
    private = [Path(settings.LOOP_DATA_DIR), Path(settings.BASE_DIR), Path.home()]
    found = []
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        path = Path(entry)
        if not path.is_absolute() or not path.is_dir():
            continue
        if _covered(path, SYSTEM_DIRS + TOP_LINKS):
            found.append(entry)
        elif not any(_within(path, folder) for folder in private):
            found.append(entry)
    return found


def visible_path() -> str:
    """The worker's PATH without the folders the sandbox does not show."""
    shown = set(_path_folders()) | set(settings.LOOP_SANDBOX_READ)
    entries = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(entry for entry in entries if entry in shown)


def _hidden(bound: list[str]) -> list[str]:
    args: list[str] = []
    for folder in (settings.LOOP_DATA_DIR, settings.BASE_DIR):
        path = Path(folder).resolve()
        if _covered(path, bound):
            args += ["--tmpfs", str(path)]
    for secret in (*HOST_SECRETS, *secret_files(), *settings.LOOP_SANDBOX_HIDE):
        path = Path(secret)
        if path.is_dir():
            args += ["--tmpfs", str(path)]
        elif path.exists():
            args += ["--ro-bind", "/dev/null", str(path)]
    return args


def secret_files() -> list[str]:
    """The files the console read a secret from (SECRET_KEY_FILE and the like)."""
    return [value for name, value in os.environ.items() if name.endswith("_FILE") and value]


def _own(confinement: Confinement, call_folder: str | None, relay: str | None) -> list[str]:
    workdir = confinement.workdir
    args: list[str] = []
    for folder in confinement.read:
        args += ["--ro-bind-try", folder, folder]
    args += ["--bind" if confinement.writable else "--ro-bind", workdir, workdir]
    args += _git_metadata(Path(workdir), writable=confinement.writable)
    for folder in (*confinement.write, *settings.LOOP_SANDBOX_WRITE):
        if not _within(Path(folder), Path(workdir)):
            args += ["--bind-try", folder, folder]
    if confinement.home:
        args += ["--bind", confinement.home, confinement.home]
    if call_folder:
        args += ["--bind", call_folder, CALL_FOLDER]
    if relay:
        args += ["--ro-bind", relay, RELAY_FOLDER]
    return args


def _git_metadata(workdir: Path, *, writable: bool) -> list[str]:
    """A repository's git folder (`.git`, or a worktree's common folder): read-write with the
    workspace, so an agent may add and commit, but its configuration, hooks, `info` and
    submodule folders read-only, so that nothing it writes there is ever run by a person's
    git, or the console's own."""
    dotgit = workdir / ".git"
    if dotgit.is_dir():
        common = dotgit.resolve()
    elif dotgit.is_file() and (admin := _gitdir_of(dotgit)) is not None:
        common = _common_dir(admin)
    else:
        return []
    args = ["--bind" if writable else "--ro-bind", str(common), str(common)]
    if not writable:
        return args
    for name in GIT_PROTECTED_FOLDERS:
        try:
            (common / name).mkdir(exist_ok=True)  # as `git init` makes them
        except OSError:
            continue
    for name in (*GIT_PROTECTED_FOLDERS, "config"):
        if (common / name).exists():
            args += ["--ro-bind", str(common / name), str(common / name)]
    return args


def _gitdir_of(dotgit_file: Path) -> Path | None:
    try:
        text = dotgit_file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    target = Path(text.split(":", 1)[1].strip())
    return (target if target.is_absolute() else dotgit_file.parent / target).resolve()


def _common_dir(admin: Path) -> Path:
    try:
        common = (admin / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return admin
    path = Path(common)
    return (path if path.is_absolute() else admin / path).resolve()


def _within(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def _covered(path: Path, folders) -> bool:
    return any(_within(path, Path(folder)) for folder in folders if os.path.exists(folder))
