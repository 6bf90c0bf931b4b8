"""A fork's own git worktrees (loops/stepmachine/forking.py calls `own_worktrees`).

A role in `isolation: worktree` works on a branch of the run's repository in a worktree of
its own. The fork must not write into the original's: each carried session of such a role
gets the fork's branch, `loop/<fork>/<role>-r<round>`, pointed at the commit its worktree
had when the forked turn finished (its last carried turn's `worktree_diff`, else the commit
the worktree began at), and a live one gets a worktree on it. A later session of the role
in the fork starts from that branch, as it would have from the original's.
"""

from __future__ import annotations

from collections.abc import Iterable

from runs.errors import Conflict
from runs.models import Iteration, NodeRun

from . import git


def own_worktrees(new, old, copies: Iterable[NodeRun], repository: str | None) -> None:
    rows = sorted(
        (copy for copy in copies if copy.state.get("isolation") == "worktree"),
        key=lambda copy: (copy.node_id, copy.generation),
    )
    if not rows:
        return
    if repository is None:
        raise Conflict("the original's git repository is gone: its worktrees cannot be forked")
    planned = []
    for copy in rows:
        commit = _commit_then(old, copy)
        live = copy.status == NodeRun.Status.RUNNING
        if commit is None and live:
            raise Conflict(
                f"session #{copy.generation + 1} of {copy.node_id} works in a git worktree "
                "opened before the console recorded where worktrees begin: it cannot be forked"
            )
        if commit is not None:
            planned.append((copy, commit, live))
    made = []  # (worktree path or None, branch) to undo if git refuses
    try:
        # Generation order: the branch ends at the latest session's commit, the live one's.
        for copy, commit, live in planned:
            branch = f"loop/{new.pk}/{copy.node_id}-r{copy.state.get('round', 1)}"
            git.set_branch(repository, branch, commit)
            made.append((None, branch))
            state = {**copy.state, "branch": branch, "base": commit}
            if live:
                path = git.role_worktree_path(
                    new.pk, copy.node_id, state.get("round", 1), copy.generation + 1
                )
                git.add_worktree(repository, path, branch)
                made.append((path, branch))
                state["workdir"] = str(path)
            NodeRun.objects.filter(pk=copy.pk).update(state=state)
            copy.state = state
    except git.GitError as exc:
        for path, branch in reversed(made):
            git.remove_worktree(repository, path, branch)
        raise Conflict(f"the fork's worktree could not be made: {exc}") from None


def _commit_then(old, copy: NodeRun) -> str | None:
    """The commit the original session's worktree had after the turns carried in `copy`."""
    numbers = list(Iteration.objects.filter(node_run=copy).values_list("number", flat=True))
    recorded = (
        old.events.filter(
            kind="worktree_diff",
            step=copy.node_id,
            data__session=copy.generation + 1,
            data__iteration__in=numbers,
        )
        .order_by("-seq")
        .values_list("data__commit", flat=True)
        .first()
    )
    return recorded or copy.state.get("base")
