"""A git worktree per run, so parallel runs on one repository do not collide.

Enabled by the environment variable LOOP_GIT_WORKTREES=1. When a run is started with a
working directory that is the top of a git repository, the run gets its own worktree at
LOOP_DATA_DIR/runs/<id>/worktree on a new branch `loop/run-<id>` (from the repository's
HEAD), and every step of the run executes there. The user's checkout is never touched.

After each agent call, whatever changed in the worktree is committed on the run's branch
and recorded as a `worktree_diff` run event (node, iteration, `git diff --stat`, the
patch), so the console can show each iteration's diff. The worktree and its branch are
left in place when the run ends: the branch is the run's work product. Remove them with
`git worktree remove <path>` and `git branch -D loop/run-<id>` once merged.
"""

from __future__ import annotations

import logging
import re
import subprocess
import time
from pathlib import Path

from django.conf import settings
from django.db import transaction

from runs import kinds
from runs.sandbox.repository import is_repository_top, record_worktree, run_git

log = logging.getLogger(__name__)

BRANCH_PREFIX = "loop/run-"
PATCH_LIMIT = 100_000


class WorktreeError(Exception):
    pass


def enabled() -> bool:
    """Read at call time (not frozen in settings) so one process can serve both cases."""
    from console.env import env_bool

    return env_bool("LOOP_GIT_WORKTREES", False)


def git(
    *args: str,
    cwd: Path | str,
    env: dict | None = None,
    confined: bool = False,
    writable: tuple[str, ...] = (),
    repository: str | Path | None = None,
) -> subprocess.CompletedProcess:
    """The console's git (runs.sandbox.repository.run_git: hardened, its repository from
    the console's records). `env`: git's own variables for this call (a private index or
    object store); `confined`: on a tree an agent worked in, inside the sandbox;
    `repository`: the person's repository when `cwd` may be a worktree they made."""
    return run_git(
        args, cwd=cwd, env=env, confined=confined, writable=writable, repository=repository
    )


def repository_root(path: Path | str) -> Path | None:
    """The repository whose top is exactly `path` (a folder inside a repo does not count),
    when the console may run git there (runs.sandbox.repository.layout_of)."""
    path = Path(path)
    if not path.is_dir() or not is_repository_top(path):
        return None
    found = git("rev-parse", "--show-toplevel", cwd=path)
    if found.returncode != 0:
        return None
    return path.resolve()


def path_for(run_id: int) -> Path:
    return Path(settings.LOOP_DATA_DIR) / "runs" / str(run_id) / "worktree"


def seen_ref(run_id: int) -> str:
    return f"refs/loop/seen/run-{run_id}"


def branch_for(run_id: int, repository: Path) -> str:
    branch = f"{BRANCH_PREFIX}{run_id}"
    taken = git("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", cwd=repository)
    if taken.returncode == 0:  # left by an earlier database that reused this run id
        branch += f"-{time.strftime('%Y%m%d%H%M%S')}"
    return branch


def create(run_id: int, repository: Path, start_point: str = "HEAD") -> Path:
    destination = path_for(run_id)
    destination.parent.mkdir(parents=True, exist_ok=True)
    branch = branch_for(run_id, repository)
    added = git("worktree", "add", "-b", branch, str(destination), start_point, cwd=repository)
    if added.returncode != 0:
        raise WorktreeError(
            f"git worktree add failed: {added.stderr.strip() or added.stdout.strip()}"
        )
    record_worktree(destination, repository)
    git("update-ref", seen_ref(run_id), "HEAD", cwd=destination)
    return destination


def on_run_created(sender, instance, created: bool, **kwargs) -> None:
    """post_save of Run: a new run that targets a repository moves into its own worktree.

    Done once the run's row commits (start_run first sets aside any folder an earlier
    database left under the same run id) and before its first task is sent."""
    if not created or not instance.workdir or not enabled():
        return
    if kinds.of_run(instance).own_worktrees:
        return  # the kind makes its own isolation (a step machine: one per role)
    repository = repository_root(instance.workdir)
    if repository is not None:
        # A fork starts from the commit its original had reached at the fork point.
        start_point = (instance.fork_point or {}).get("commit") or "HEAD"
        transaction.on_commit(lambda: _move_into_worktree(instance, repository, start_point))


def _move_into_worktree(run, repository: Path, start_point: str = "HEAD") -> None:
    try:
        destination = create(run.pk, repository, start_point)
    except (WorktreeError, OSError, subprocess.SubprocessError) as exc:
        with transaction.atomic():
            locked = type(run).objects.select_for_update().get(pk=run.pk)
            locked.fail(f"could not give the run its own git worktree: {exc}")
        return
    run.workdir = str(destination)
    type(run).objects.filter(pk=run.pk).update(workdir=run.workdir)


def connect() -> None:
    from django.db.models.signals import post_save

    post_save.connect(on_run_created, sender="runs.Run", dispatch_uid="loop-git-worktree")


_RUN_WORKTREE = re.compile(r"^(\d+)/worktree$")


def run_of(workdir: str) -> int | None:
    """The run id when `workdir` is one of our worktrees."""
    try:
        relative = (
            Path(workdir).resolve().relative_to(Path(settings.LOOP_DATA_DIR).resolve() / "runs")
        )
    except ValueError:
        return None
    match = _RUN_WORKTREE.match(relative.as_posix())
    return int(match.group(1)) if match else None


def fork_start(run, before, *, node_id: str = "", iteration: int = 0) -> tuple[str, str] | None:
    """For a fork of `run` at iteration `iteration` of `node_id`, which finished at `before`:
    its repository and the commit of its worktree then (that iteration's own diff, else the
    last one recorded by then, else the commit the run started from). None when `run` did
    not work in a worktree of ours."""
    if not enabled() or not run.workdir or run_of(run.workdir) != run.pk:
        return None
    workdir = Path(run.workdir)
    if not workdir.is_dir():
        return None
    common = git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=workdir)
    if common.returncode != 0:
        return None
    repository = Path(common.stdout.strip()).parent
    diffs = run.events.filter(kind="worktree_diff").order_by("-seq")
    # An iteration's own diff is logged in its finishing transaction, just after its
    # finish time: look it up by name, not by time.
    recorded = (
        diffs.filter(step=node_id, data__iteration=iteration)
        .values_list("data__commit", flat=True)
        .first()
    ) or diffs.filter(created_at__lte=before).values_list("data__commit", flat=True).first()
    if recorded:
        return str(repository), recorded
    ours = f"loop run {run.pk}: "
    history = git("log", "--format=%H %s", "HEAD", cwd=workdir).stdout.splitlines()
    for line in history:
        commit, _, subject = line.partition(" ")
        if not subject.startswith(ours):
            return str(repository), commit
    return None


def record_changes(workdir: str, *, iteration: int, node_id: str = "") -> dict | None:
    """Commit what changed since the last record and return it (the `worktree_diff` event's
    data), or None when nothing changed. Writes no row: the executor logs it in the
    transaction that finishes the call, once it knows the call is still its own."""
    run_id = run_of(workdir)
    if run_id is None:
        return None
    # The agent's tree: git runs inside the sandbox, as the agent did (see
    # runs.sandbox.repository).
    if git("status", "--porcelain", cwd=workdir, confined=True).stdout.strip():
        git("add", "-A", cwd=workdir, confined=True)
        git(
            "commit",
            "--no-verify",
            "-q",
            "-m",
            f"loop run {run_id}: {node_id} iteration {iteration}",
            cwd=workdir,
            confined=True,
        )
    since = seen_ref(run_id)
    stat = git("diff", "--stat", since, "HEAD", cwd=workdir, confined=True).stdout.strip()
    if not stat:
        return None
    patch = git("diff", since, "HEAD", cwd=workdir, confined=True).stdout
    commit = git("rev-parse", "HEAD", cwd=workdir).stdout.strip()
    git("update-ref", seen_ref(run_id), "HEAD", cwd=workdir)
    data = {
        "iteration": iteration,
        "commit": commit,
        "stat": stat,
        "diff": patch[:PATCH_LIMIT],
        "truncated": len(patch) > PATCH_LIMIT,
    }
    return data


def merge_diffs(first: dict | None, then: dict | None) -> dict | None:
    """Two records of one call (a re-ask after the first answer): one diff, first to last."""
    if not first or not then:
        return then or first
    patch = first["diff"] + then["diff"]
    return {
        **then,
        "stat": f"{first['stat']}\n{then['stat']}",
        "diff": patch[:PATCH_LIMIT],
        "truncated": first["truncated"] or then["truncated"] or len(patch) > PATCH_LIMIT,
    }


class RecordingDiffs:
    """Wraps a provider: after each call in a run's worktree, record what changed."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.structured_output = inner.structured_output

    def run(self, request, on_chunk):
        from runs.executor.lease import keep_lease, renewer

        result = self.inner.run(request, on_chunk)
        try:
            # git can take a while on a big tree, and the agent prints nothing meanwhile.
            with keep_lease(renewer(on_chunk)):
                result.worktree_diff = record_changes(
                    request.workdir, node_id=request.node_id, iteration=request.iteration
                )
        except (OSError, subprocess.SubprocessError):
            log.exception("could not record the worktree diff of %s", request.workdir)
        return result
