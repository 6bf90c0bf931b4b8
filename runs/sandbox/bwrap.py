"""The bubblewrap command line for one child process: what it sees, nothing more.

The sandbox starts from an empty root and gets, in this order (a later mount covers an
earlier one):

1. the system, read-only: /usr (and /bin, /lib… as the host has them), /etc, /opt, the
   Python this console runs on and its virtualenv (the agent tools' relay, `script:`
   nodes without uv), the folders of the worker's PATH, the administrator's
   LOOP_SANDBOX_READ; private /tmp, /run and /var/tmp (each holding at most the memory
   limit), its own /proc (its own processes only) and a minimal /dev;
2. hidden again where they fall inside those: the data folder, the console's checkout, the
   files the console reads its secrets from, the host's password and key files, the
   administrator's LOOP_SANDBOX_HIDE;
3. its own: an agent program's folders and the files its command names (read-only, never
   a hidden one: `may_show`), the workspace (read-write or read-only), the run's artifacts
   and HOME, the administrator's LOOP_SANDBOX_WRITE, the call's private folder at
   /run/loop (its tool socket and token) and the tools relay at /run/loop-tools;
4. the git folders of a repository the console knows works there (its records, never the
   tree's `.git` file: repository.py), mounted by descriptor: an agent may edit files, add
   and commit, but configuration, hooks, `info`, submodules, alternates and a worktree's
   links stay read-only, so it never plants something a person's or the console's own git
   would run or follow later.

What step 2 hid that falls inside step 3's read-only folders is hidden again after them:
hiding always wins.

Always a user namespace of its own (the worker's uid, and no capabilities, even for a root
worker) where it may make no further user namespaces, new PID, IPC, UTS and cgroup
namespaces (mode.isolation); a new network namespace (loopback only) unless the confinement allows
the network. The child dies with the worker.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from django.conf import settings

from console.secrets import SECRET_NAMES

from . import repository
from .confinement import MB, Confinement, Limits
from .mode import bwrap_path, isolation

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
# The private, memory-backed folders of every sandbox (size-bounded: _tmpfs_size).
PRIVATE_FOLDERS = ("/tmp", "/run", "/var/tmp")
# The worker's own views of the kernel: a command naming a file there gets nothing mounted.
UNSHOWN_SYSTEM = ("/proc", "/sys", "/dev")
# What git runs or reads as instructions: never writable from inside a sandbox.
GIT_PROTECTED_FOLDERS = ("hooks", "info", "modules", "objects/info")


def command(
    argv: list[str],
    confinement: Confinement,
    *,
    call_folder: str | None,
    relay: str | None,
    fds: list[int] | None = None,
) -> list[str]:
    """bubblewrap's arguments; `fds` receives the descriptors it mounts by descriptor,
    which the caller passes to the child and closes once it has started."""
    fds = [] if fds is None else fds
    # Its own user namespace without capabilities, new PID, IPC, UTS and cgroup namespaces:
    # the flags the probe started bubblewrap with (mode.isolation).
    args = [bwrap_path() or "bwrap", *isolation()]
    if not confinement.network:
        args.append("--unshare-net")
    readable = _read_only_extras()
    args += _system(confinement.limits)
    for folder in readable:
        args += ["--ro-bind-try", folder, folder]
    args += _hidden([*SYSTEM_DIRS, *readable])
    # The console's virtualenv lives in its checkout, which step 2 may have hidden.
    if sys.prefix != sys.base_prefix:
        args += ["--ro-bind", sys.prefix, sys.prefix]
    args += _own(confinement, call_folder, relay, fds)
    # A program's folder or a file a command names, shown in step 3, may hold a secret
    # that step 2 hid: hidden again, so hiding always wins.
    args += _hidden_again(confinement.read)
    args += ["--chdir", confinement.workdir, "--"]
    # Through env(1), a program that is missing or not executable exits 127 or 126, as it
    # would from a shell (bubblewrap itself would exit 1).
    if "=" not in argv[0]:
        args += ["/usr/bin/env", "--"]
    return args + argv


def _system(limits: Limits) -> list[str]:
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
    for folder in PRIVATE_FOLDERS:
        args += [*_tmpfs_size(limits), "--tmpfs", folder]
    resolver = Path("/etc/resolv.conf")
    if resolver.is_symlink():  # e.g. systemd-resolved's file under /run
        target = resolver.resolve().parent
        args += ["--ro-bind-try", str(target), str(target)]
    return args


def _tmpfs_size(limits: Limits) -> list[str]:
    size = limits.tmp_mb()
    return ["--size", str(size * MB)] if size else []


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
    for secret in _secrets():
        args += _cover(secret)
    return args


def _hidden_again(shown: tuple[str, ...]) -> list[str]:
    """The secrets inside what the confinement shows read-only after step 2 (an agent
    program's folder, a file its command names), covered again."""
    args: list[str] = []
    for secret in _secrets():
        if any(_within(secret, Path(entry)) for entry in shown):
            args += _cover(secret)
    return args


def _secrets() -> list[Path]:
    """What is hidden wherever it falls: the host's password and key files, the console's
    secret files, LOOP_SANDBOX_HIDE."""
    return [Path(entry) for entry in (*HOST_SECRETS, *secret_files(), *settings.LOOP_SANDBOX_HIDE)]


def _cover(path: Path) -> list[str]:
    """An empty folder over a folder, /dev/null over anything else."""
    try:
        if path.is_dir():
            return ["--tmpfs", str(path)]
        if path.exists():
            return ["--ro-bind", "/dev/null", str(path)]
    except OSError:
        pass  # not even the worker can look there: nor can its child, of the same user
    return []


def may_show(path: str, *, program_folder: bool = False) -> bool:
    """Whether a file that a command names, or (`program_folder`) the folder of the program
    it starts, may be shown read-only: never anything of /proc, /sys or /dev (the worker's,
    not the sandbox's), a secret (`_secrets`), anything in the data folder or the worker's
    HOME, nor a folder holding the data folder, the checkout or the HOME. A program's
    folder may lie in the checkout or the HOME, as an agent CLI's does (~/.local/bin); the
    secrets in it are hidden again (`_hidden_again`)."""
    target = Path(path)
    if any(_within(target, Path(top)) for top in UNSHOWN_SYSTEM):
        return False
    if any(_within(target, secret) for secret in _secrets()):
        return False
    data, checkout = Path(settings.LOOP_DATA_DIR), Path(settings.BASE_DIR)
    private = [data, checkout]
    if Path.home() != Path("/"):
        private.append(Path.home())
    if any(_within(folder, target) for folder in private):
        return False
    # A file of the checkout the administrator's command names is shown alone (a test's
    # scripted agent); the data folder and the worker's HOME hold what no command needs.
    inside = [data] if program_folder else [folder for folder in private if folder != checkout]
    return not any(_within(target, folder) for folder in inside)


def secret_files() -> list[str]:
    """The files the console reads a secret from: NAME_FILE for each of its own secrets and
    provider keys (console.secrets.SECRET_NAMES), each key LOOP_PROVIDER_ENV lets a
    provider name, and each name in LOOP_SECRET_FILE_NAMES. No other `*_FILE`: a CA bundle
    (SSL_CERT_FILE) and the like pass through untouched."""
    from runs.providers.policy import admin_key_entries

    names = [
        *SECRET_NAMES,
        *(name for _, name in admin_key_entries()),
        *(name.removesuffix("_FILE") for name in settings.LOOP_SECRET_FILE_NAMES),
    ]
    return [path for name in dict.fromkeys(names) if (path := os.environ.get(f"{name}_FILE"))]


def _own(
    confinement: Confinement, call_folder: str | None, relay: str | None, fds: list[int]
) -> list[str]:
    workdir = confinement.workdir
    args: list[str] = []
    for folder in confinement.read:
        args += ["--ro-bind-try", folder, folder]
    args += ["--bind" if confinement.writable else "--ro-bind", workdir, workdir]
    args += _git_metadata(confinement, fds)
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


def _git_metadata(confinement: Confinement, fds: list[int]) -> list[str]:
    """The git folders of the repository the console knows works here
    (`repository.layout_of`: its records, never a `.git` file or `commondir` of the tree):
    objects, refs and logs writable with the workspace, so an agent may add and commit, but
    what git reads as instructions (configuration, hooks, `info`, submodules, alternates,
    a worktree's links) read-only, so nothing it writes there is run by a person's git or
    the console's own. Mounted by descriptor, opened without following links, so a link
    planted in the tree cannot turn a mount elsewhere."""
    writable = confinement.writable
    try:
        layout = repository.layout_of(confinement.workdir, confinement.repository)
    except repository.UntrustedRepository:
        return []  # its `.git` is the agent's own: a file of the workspace, nothing more
    if layout is None:
        return []
    # A later mount covers an earlier one: each folder first, then what is read-only in it.
    mount = _Mounts(fds)
    if not layout.linked:  # the repository's own `.git`, inside the workspace
        mount.same(layout.git_dir, writable)  # a mount point: it cannot be swapped away
        if writable:
            for name in GIT_PROTECTED_FOLDERS:
                _make_folder(layout.git_dir, name)
            mount.read_only(layout.git_dir, (*GIT_PROTECTED_FOLDERS, "worktrees", "config"))
        return mount.args
    common, admin = layout.common_dir, layout.git_dir
    mount.same(common, False)
    if writable:
        _make_folder(common, "logs")
        _make_folder(common, "objects/info")
        for name in ("objects", "refs", "logs"):
            mount.same(common / name, True)
        mount.same(admin, True)
        _make_empty_file(admin, "config.worktree")  # so there is one to keep read-only
        mount.read_only(common, ("objects/info",))
        mount.read_only(admin, ("commondir", "gitdir", "config.worktree"))
    mount.read_only(layout.work_tree, (".git",))
    return mount.args


class _Mounts:
    """bubblewrap mounts of paths opened without following links (O_PATH | O_NOFOLLOW per
    component), passed to bubblewrap as descriptors."""

    def __init__(self, fds: list[int]):
        self.fds = fds
        self.args: list[str] = []

    def same(self, path: Path, writable: bool) -> None:
        """`path` at its own place, read-write or read-only."""
        fd = _open_no_links(path)
        if fd is not None:
            self.fds.append(fd)
            self.args += ["--bind-fd" if writable else "--ro-bind-fd", str(fd), str(path)]

    def read_only(self, folder: Path, names) -> None:
        for name in names:
            self.same(folder / name, False)


def _open_no_links(path: Path) -> int | None:
    """An O_PATH descriptor of `path`, or None when it is missing or any component of it
    is a link."""
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY)
    try:
        for part in Path(os.path.abspath(path)).parts[1:]:
            following = os.open(part, os.O_PATH | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = following
            if stat.S_ISLNK(os.fstat(fd).st_mode):
                raise OSError(f"{path}: a link")
    except OSError:
        os.close(fd)
        return None
    return fd


def _make_empty_file(folder: Path, name: str) -> None:
    fd = _open_no_links(folder)
    if fd is None:
        return
    try:
        made = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=fd)
        os.close(made)
    except OSError:
        pass  # there already (read-only since the first sandbox), or not ours to make
    finally:
        os.close(fd)


def _make_folder(folder: Path, name: str) -> None:
    """`folder/name` made where missing (as `git init` makes `hooks` and `info`), so there
    is something to mount read-only; never through a link."""
    fd = _open_no_links(folder)
    try:
        for part in Path(name).parts:
            if fd is None:
                return
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            following = os.open(part, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = following
    except OSError:
        return
    finally:
        if fd is not None:
            os.close(fd)


def _within(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def _covered(path: Path, folders) -> bool:
    return any(_within(path, Path(folder)) for folder in folders if os.path.exists(folder))
