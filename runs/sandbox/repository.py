"""A git repository the console works in: where its git folders are, and the console's own
git on it.

An agent writes whatever it wants into its workspace, and git takes instructions from a
repository: a worktree's `.git` file and a git folder's `commondir` say where the
repository is; its configuration names programs to run (core.fsmonitor, hooks, diff,
merge and filter drivers, an ssh command). So nothing an agent could have written decides
where the repository is, what the sandbox mounts, or what the console's git runs:

- **Where**: a worktree the console made is recorded when the console makes it
  (`record_worktree`), in a file beside it that no sandbox mounts; `layout_of` answers from
  that record, and the console's git runs with GIT_DIR / GIT_COMMON_DIR / GIT_WORK_TREE set
  from it, so a `.git` file or `commondir` written later is never read. A repository's own
  `.git` folder counts only when it is a real folder (not a link) of a folder a person
  chose (not a run's own folder), where the sandbox keeps its configuration read-only.
  Any other `.git` is just a file of the workspace.
- **What runs**: no system or global configuration, and every key of the repository's own
  that names a program is overridden (`HARDENED`): no hooks, no fsmonitor, no external
  diff or textconv program, no ssh command of the repository's, no `ext::` transport, no
  signing program, no credential helper.
- **Where it runs**: git on a tree an agent worked in (status, add, commit, diff, log of
  a turn) runs inside the sandbox too (`confined=True`), seeing only that tree, so anything
  git still runs (a filter driver the person configured) runs where the agent already was.
  Git in a person's repository that must reach the network or the person's credentials
  (the review's merge and push) runs hardened, outside it.

docs/security.md ("The console's own git") lists which git commands run where.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from . import files

log = logging.getLogger(__name__)

GIT_IDENTITY = ["-c", "user.name=Loop Console", "-c", "user.email=loop-console@localhost"]
# Every configuration key of a repository that can name a program git runs for a command
# the console uses, set here (command-line configuration wins over the repository's).
HARDENED = [
    *("-c", "core.fsmonitor=false"),
    *("-c", "core.hooksPath=/dev/null"),
    *("-c", "core.sshCommand=ssh"),
    *("-c", "core.editor=true"),
    *("-c", "core.pager=cat"),
    *("-c", "core.untrackedCache=false"),
    *("-c", "protocol.ext.allow=never"),
    *("-c", "commit.gpgSign=false"),
    *("-c", "tag.gpgSign=false"),
    *("-c", "credential.helper="),
    # No housekeeping of its own: in a sandbox the repository's common files are read-only.
    *("-c", "gc.auto=0"),
    *("-c", "maintenance.auto=false"),
]
# Commands that may show a diff run no external diff or textconv program (an empty
# `diff.external` would break them instead).
SHOWS_DIFFS = {"diff", "log", "show"}
NO_DIFF_PROGRAMS = ["--no-ext-diff", "--no-textconv"]
RECORD_SUFFIX = ".git.json"


class UntrustedRepository(OSError):
    """A `.git` the console did not make and cannot trust: its git does not run there."""


@dataclass(frozen=True)
class Layout:
    work_tree: Path
    git_dir: Path  # a worktree's own folder in the repository (`.git/worktrees/<name>`)
    common_dir: Path  # the repository's `.git`

    @property
    def linked(self) -> bool:
        return self.git_dir != self.common_dir

    def env(self) -> dict[str, str]:
        return {
            "GIT_DIR": str(self.git_dir),
            "GIT_COMMON_DIR": str(self.common_dir),
            "GIT_WORK_TREE": str(self.work_tree),
        }


def record_file(worktree: Path) -> Path:
    return worktree.parent / (worktree.name + RECORD_SUFFIX)


def record_worktree(worktree: Path, repository: Path) -> Layout:
    """Record a worktree the console has just made (`git worktree add`), before any agent
    worked in it: its `.git` file is still the one git wrote."""
    worktree = Path(os.path.abspath(worktree))
    common = Path(os.path.realpath(Path(repository) / ".git"))
    git_dir = _gitdir_written_by_git(worktree, common)
    layout = Layout(worktree, git_dir, common)
    data = {"git_dir": str(git_dir), "common_dir": str(common)}
    record = record_file(worktree)
    files.write_file(record.parent, record.name, json.dumps(data).encode(), mode=0o600)
    return layout


def _gitdir_written_by_git(worktree: Path, common: Path) -> Path:
    text = (worktree / ".git").read_text(encoding="utf-8").strip()
    if not text.startswith("gitdir:"):
        raise UntrustedRepository(f"{worktree}/.git is not a worktree's link")
    target = Path(text.split(":", 1)[1].strip())
    target = Path(os.path.realpath(target if target.is_absolute() else worktree / target))
    if target.parent != common / "worktrees":
        raise UntrustedRepository(f"{worktree} is not a worktree of {common.parent}")
    return target


def layout_of(path: str | Path, repository: str | Path | None = None) -> Layout | None:
    """The repository whose working tree is `path`, from the console's records; None when
    `path` is no repository of the console's. UntrustedRepository when `path` holds a
    `.git` that nothing vouches for (a link, a `.git` file the console did not write, any
    `.git` in a run's own folders that is not a worktree of the console's). `repository`:
    a person's repository of which `path` may be a worktree the person made (found from
    the repository's side, which the sandbox keeps read-only, never from `path/.git`)."""
    path = Path(os.path.abspath(path))
    recorded = _recorded(path)
    if recorded is not None:
        return recorded
    try:
        mode = os.lstat(path / ".git").st_mode
    except OSError:
        return None
    if not _in_runs_folder(path):
        if stat.S_ISDIR(mode):
            git_dir = path / ".git"
            return Layout(path, git_dir, git_dir)
        if repository is not None and (found := _worktree_of(Path(repository), path)):
            return found
    raise UntrustedRepository(
        f"{path}/.git was not made by the console (an agent may have written it): the "
        "console's git does not run there"
    )


def _recorded(worktree: Path) -> Layout | None:
    record = record_file(worktree)
    try:
        data = json.loads(files.read_file(record.parent, record.name, limit=64 * 1024).data)
    except (OSError, ValueError):
        return None
    layout = Layout(worktree, Path(data["git_dir"]), Path(data["common_dir"]))
    # With extensions.worktreeConfig, git reads a worktree's own configuration from its
    # folder: the sandbox keeps an empty one there read-only; any other is refused.
    planted = layout.git_dir / "config.worktree"
    if os.path.lexists(planted) and not _empty_regular_file(planted):
        raise UntrustedRepository(f"{worktree}: a config.worktree appeared in its git folder")
    return layout


def _worktree_of(repository: Path, path: Path) -> Layout | None:
    """`path` as a worktree of `repository`: the worktree folder in the repository's
    `.git/worktrees` whose `gitdir` names `path/.git`."""
    main = layout_of(repository)
    if main is None or main.linked:
        return None
    expected = str(path / ".git")
    try:
        folders = list(os.scandir(main.common_dir / "worktrees"))
    except OSError:
        return None
    for folder in folders:
        if folder.is_dir(follow_symlinks=False) and _first_line(folder.path) == expected:
            return Layout(path, Path(folder.path), main.common_dir)
    return None


def _first_line(folder: str) -> str:
    try:
        return files.read_file(folder, "gitdir", limit=4096).text().strip()
    except OSError:
        return ""


def _empty_regular_file(path: Path) -> bool:
    info = os.lstat(path)
    return stat.S_ISREG(info.st_mode) and info.st_size == 0


def _in_runs_folder(path: Path) -> bool:
    """Under the data folder's runs/: a run's own folders, which its agents write."""
    runs = os.path.realpath(Path(settings.LOOP_DATA_DIR) / "runs")
    real = os.path.realpath(path)
    return real == runs or real.startswith(runs + os.sep)


def is_repository_top(path: str | Path) -> bool:
    try:
        return layout_of(path) is not None
    except UntrustedRepository:
        return False


# --- running git ---------------------------------------------------------------------------
def run_git(
    args: list[str] | tuple[str, ...],
    *,
    cwd: str | Path,
    env: dict | None = None,
    confined: bool = False,
    writable: tuple[str, ...] = (),
    repository: str | Path | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess:
    """git `args` in `cwd`, hardened, its repository from the records. `confined`: inside
    the sandbox, seeing `cwd`'s tree (and `writable`, further folders it writes).
    `repository`: the person's repository when `cwd` may be a worktree of theirs."""
    from .environment import child_env

    try:
        layout = layout_of(cwd, repository)
    except UntrustedRepository as exc:
        # As git itself answers where there is no repository: every caller handles that.
        log.warning("%s", exc)
        return subprocess.CompletedProcess(["git", *args], 128, "", f"fatal: {exc}\n")
    where = {"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}
    where["GIT_CONFIG_GLOBAL"] = "/dev/null"
    where["GIT_ATTR_NOSYSTEM"] = "1"
    if layout is not None:
        where.update(layout.env())
    else:  # no repository here: git must not find one in a folder above either
        where["GIT_CEILING_DIRECTORIES"] = os.path.dirname(os.path.abspath(cwd))
    safe = ["-c", f"safe.directory={layout.work_tree if layout else os.path.abspath(cwd)}"]
    args = list(args)
    if args and args[0] in SHOWS_DIFFS:
        args[1:1] = NO_DIFF_PROGRAMS
    argv = ["git", *safe, *HARDENED, *GIT_IDENTITY, *args]
    full_env = {**where, **(env or {})}
    if confined:
        return _confined(argv, layout, cwd, full_env, writable, repository, timeout)
    return subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=child_env(full_env)
    )


def _confined(argv, layout, cwd, env, writable, repository, timeout) -> subprocess.CompletedProcess:
    from .confinement import for_run
    from .environment import child_env
    from .space import CallSpace

    work = str(layout.work_tree if layout else cwd)
    known = str(repository) if repository else None
    confinement = for_run(None, work, network=False, write=tuple(writable), repository=known)
    with CallSpace(confinement) as space:
        command = space.command(argv) if space.sandboxed else argv
        try:
            return subprocess.run(
                command,
                cwd=cwd,
                capture_output=True,
                text=True,
                timeout=timeout,
                env=child_env(env, sandboxed=space.sandboxed),
                pass_fds=space.fds,
            )
        finally:
            space.close_fds()


def tidy_git_folder(workdir: str | Path) -> None:
    """After an agent worked in a person's repository: a `commondir` in its `.git` (git
    never writes one there) would send the person's own git to a repository the agent
    made. Removed, never followed."""
    try:
        layout = layout_of(workdir)
    except UntrustedRepository:
        return
    if layout is None or layout.linked:
        return
    planted = layout.git_dir / "commondir"
    if os.path.lexists(planted):
        log.warning("removed %s, written in a sandbox: git would have followed it", planted)
        if stat.S_ISDIR(os.lstat(planted).st_mode):
            shutil.rmtree(planted)  # never follows a link
        else:
            os.unlink(planted)
