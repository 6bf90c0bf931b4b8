"""Git for step machines: the run's repository, role worktrees and branches, commits.

Every call goes through `runs.worktree.git` (the allow-listed child environment, no
terminal prompts). Branch names come from recipes and inputs: they are checked with
`git check-ref-format` and passed as arguments, never through a shell.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from django.conf import settings

from runs.sandbox import files
from runs.sandbox.repository import record_file, record_worktree
from runs.worktree import git, repository_root

__all__ = [
    "GitError",
    "add_worktree",
    "branches",
    "check_branch",
    "checkout",
    "commit_all",
    "current_branch",
    "default_branch",
    "head",
    "is_repository",
    "left_since",
    "remove_worktree",
    "role_worktree_path",
    "set_branch",
    "snapshot",
    "tree_changes",
]


class GitError(Exception):
    pass


def _ok(result, what: str) -> str:
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise GitError(f"{what}: {detail[-1] if detail else f'git exited {result.returncode}'}")
    return result.stdout


def is_repository(path: str | Path | None) -> bool:
    return bool(path) and repository_root(path) is not None


def branches(repository: str | Path) -> list[str]:
    """Local branches, the default one first."""
    found = git("for-each-ref", "--format=%(refname:short)", "refs/heads", cwd=repository)
    names = sorted(line.strip() for line in found.stdout.splitlines() if line.strip())
    first = default_branch(repository)
    return sorted(names, key=lambda name: (name != first, name))


def default_branch(repository: str | Path) -> str:
    """The remote's default branch when known, else main / master, else the checked-out one."""
    remote = git("symbolic-ref", "--short", "refs/remotes/origin/HEAD", cwd=repository)
    if remote.returncode == 0 and "/" in remote.stdout:
        return remote.stdout.strip().split("/", 1)[1]
    for name in ("main", "master"):
        if (
            git("rev-parse", "--verify", "--quiet", f"refs/heads/{name}", cwd=repository).returncode
            == 0
        ):
            return name
    return current_branch(repository) or "main"


def current_branch(workdir: str | Path) -> str:
    found = git("symbolic-ref", "--short", "-q", "HEAD", cwd=workdir)
    return found.stdout.strip() if found.returncode == 0 else ""


def branch_exists(repository: str | Path, name: str) -> bool:
    return (
        git("rev-parse", "--verify", "--quiet", f"refs/heads/{name}", cwd=repository).returncode
        == 0
    )


def head(workdir: str | Path, ref: str = "HEAD") -> str:
    return _ok(git("rev-parse", "--verify", f"{ref}^{{commit}}", cwd=workdir), f"{ref}").strip()


def branch_heads(repository: str | Path) -> dict[str, str]:
    """Each branch's head, as a reviewer's digest names it ("the branch work": its commit);
    read by the console's git, confined: the repository's branches are an agent's work."""
    if not is_repository(repository):
        return {}
    found = git(
        "for-each-ref",
        "--format=%(refname:short) %(objectname)",
        "refs/heads",
        cwd=repository,
        confined=True,
        repository=repository,
    )
    heads = (line.rsplit(" ", 1) for line in found.stdout.splitlines() if " " in line)
    return {f"the branch {name}": commit for name, commit in heads}


def check_branch(repository: str | Path, name: str) -> str:
    name = (name or "").strip()
    if not name or name.startswith("-"):
        raise GitError(f"{name!r} is not a branch name")
    result = git("check-ref-format", "--branch", name, cwd=repository)
    if result.returncode != 0:
        raise GitError(f"{name!r} is not a valid branch name")
    return name


def checkout(repository: str | Path, branch: str) -> None:
    """Check `branch` out in the repository's own working tree (isolation: project)."""
    branch = check_branch(repository, branch)
    if current_branch(repository) == branch:
        return
    if not branch_exists(repository, branch):
        raise GitError(f"there is no branch {branch!r} in the repository")
    _ok(git("checkout", "--quiet", branch, "--", cwd=repository), f"git checkout {branch}")


def role_worktree_path(run_id: int, role: str, round_: int, generation: int) -> Path:
    name = f"{role}-r{round_}" + (f"-s{generation}" if generation > 1 else "")
    return Path(settings.LOOP_DATA_DIR) / "runs" / str(run_id) / "roles" / name


def add_worktree(repository: str | Path, path: Path, branch: str, base: str = "HEAD") -> None:
    """A worktree at `path` on `branch`: the existing branch, or a new one from `base`."""
    branch = check_branch(repository, branch)
    path.parent.mkdir(parents=True, exist_ok=True)
    if branch_exists(repository, branch):
        result = git("worktree", "add", str(path), branch, cwd=repository)
    else:
        result = git("worktree", "add", "-b", branch, str(path), base, cwd=repository)
    _ok(result, f"git worktree add {branch}")
    record_worktree(path, Path(repository))


def dirty(workdir: str | Path, repository: str | Path | None = None) -> bool:
    """Whether `workdir` has changes; `repository`: the person's, when `workdir` may be a
    worktree they made."""
    status = git("status", "--porcelain", cwd=workdir, confined=True, repository=repository)
    return bool(_ok(status, "git status").strip())


def commit_all(workdir: str | Path, message: str) -> str | None:
    """Commit whatever the agent left uncommitted; the new commit, or None. In the sandbox,
    like every git on an agent's tree (runs.sandbox.repository)."""
    if not dirty(workdir):
        return None
    _ok(git("add", "-A", cwd=workdir, confined=True), "git add")
    committed = git("commit", "--no-verify", "-q", "-m", message, cwd=workdir, confined=True)
    _ok(committed, "git commit")
    return head(workdir)


PATCH_LIMIT = 100_000


def snapshot(workdir: str | Path, store: Path) -> str:
    """The working tree as it is, tracked and untracked files (ignored ones left out), as a
    git tree. Written through a private copy of the index into a private object store
    (`store`, reading the repository's own as an alternate): the person's index, files,
    branches and object store are left exactly as they were."""
    env = _private_store(workdir, store)  # makes `store`
    with tempfile.TemporaryDirectory(dir=store) as private:
        index = Path(private) / "index"
        own = Path(_ok(git("rev-parse", "--git-path", "index", cwd=workdir), "git").strip())
        own = own if own.is_absolute() else Path(workdir) / own
        _copy_regular_file(own, index)  # its stat cache keeps `add -A` quick
        env["GIT_INDEX_FILE"] = str(index)
        added = git("add", "-A", cwd=workdir, env=env, confined=True, writable=(str(store),))
        _ok(added, "git add (snapshot)")
        tree = git("write-tree", cwd=workdir, env=env, confined=True, writable=(str(store),))
        return _ok(tree, "git write-tree").strip()


def _copy_regular_file(source: Path, target: Path) -> None:
    """Copy `source` when it is a regular file (the agent may have put a link or a pipe in
    its place: then the snapshot starts from no index, which is only slower)."""
    try:
        handle = files.open_file(source.parent, source.name)
    except OSError:
        return
    with os.fdopen(handle, "rb") as origin, open(target, "wb") as copy:
        shutil.copyfileobj(origin, copy)


def tree_changes(workdir: str | Path, before: str, after: str, store: Path) -> dict | None:
    """What changed between two snapshots: whatever the agent did in a working tree it
    shares with a person (committed or not), and nothing the person had there before."""
    if before == after:
        return None
    env = _private_store(workdir, store)
    seen = {"env": env, "confined": True, "writable": (str(store),)}
    shown = git("diff", "--stat", before, after, cwd=workdir, **seen).stdout
    patch = git("diff", before, after, cwd=workdir, **seen).stdout
    now = git("rev-parse", "--verify", "-q", "HEAD", cwd=workdir).stdout.strip()
    return {
        "commit": now,
        "stat": shown.strip(),
        "diff": patch[:PATCH_LIMIT],
        "truncated": len(patch) > PATCH_LIMIT,
    }


def _private_store(workdir: str | Path, store: Path) -> dict:
    objects = Path(_ok(git("rev-parse", "--git-path", "objects", cwd=workdir), "git").strip())
    objects = objects if objects.is_absolute() else Path(workdir) / objects
    store.mkdir(parents=True, exist_ok=True)
    return {
        "GIT_OBJECT_DIRECTORY": str(store),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(objects.resolve()),
    }


def changes(workdir: str | Path, since: str) -> dict | None:
    """What was committed since `since`: the new head, `--stat`, the patch (cut)."""
    now = head(workdir)
    if now == since:
        return None
    shown = git("diff", "--stat", since, now, cwd=workdir, confined=True).stdout.strip()
    patch = git("diff", since, now, cwd=workdir, confined=True).stdout
    return {
        "commit": now,
        "stat": shown,
        "diff": patch[:PATCH_LIMIT],
        "truncated": len(patch) > PATCH_LIMIT,
    }


def left_since(workdir: str | Path, since: str) -> tuple[list[str], list[str]]:
    """What the tree holds beyond `since`: the commits made after it (`sha subject`,
    oldest first) and the files changed but not committed (`git status --short`)."""
    log = git("log", "--reverse", "--format=%h %s", f"{since}..HEAD", cwd=workdir).stdout
    status = git("status", "--short", cwd=workdir, confined=True).stdout
    return log.splitlines(), status.splitlines()


def set_branch(repository: str | Path, name: str, commit: str) -> None:
    """Point `name` at `commit`, creating it or moving it (never one checked out)."""
    name = check_branch(repository, name)
    _ok(git("branch", "--force", name, commit, cwd=repository), f"git branch {name}")


def remove_worktree(repository: str | Path, path: Path | None, branch: str) -> None:
    """Undo add_worktree or set_branch (best effort): a fork that failed leaves neither."""
    if path is not None:
        git("worktree", "remove", "--force", str(path), cwd=repository)
        record_file(path).unlink(missing_ok=True)
    git("branch", "-D", branch, cwd=repository)
