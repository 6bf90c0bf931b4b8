"""Review requests: what an approved step-machine run asks a person to merge.

With no pull-request service, a run that ends `approved` (or `completed_unreviewed`) on a
branch pushes that branch to the repository's remote when it has one, and in every case
records a ReviewRequest the console shows as a page: branch, commits, the diff against the
target branch, the run's handoffs and gate logs, and a Merge button. Merging is a person's
act (`merge_policy: human`): only an operator, from the page; never an agent, never by
itself. It merges into the target branch of the local repository, refuses with the
conflicting files on a conflict, and records who merged (the review request row, shown
read-only in the admin, and a `review_merged` run event). A branch with no commit the
target lacks asks nobody to merge: its review request says nothing to merge, and an
approved run ends `nothing_to_merge`.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from loops.stepmachine.spec import SESSION_KIND
from runs.actor import Actor
from runs.errors import Conflict, NotAllowed, NotFound
from runs.executor.spec import spec_for
from runs.executor.state import lock_run
from runs.models import NodeRun, Run
from runs.worktree import git as run_git

from . import git
from .context import run_inputs
from .models import ReviewRequest

DIFF_LIMIT = 200_000
COMMITS_SHOWN = 200


def work_branch(run: Run, spec) -> str:
    """The branch the run's writing roles worked on (the latest such session's)."""
    writers = [name for name, role in spec.roles.items() if role.writes]
    sessions = NodeRun.objects.filter(run=run, kind=SESSION_KIND, node_id__in=writers).order_by(
        "-id"
    )
    for session in sessions:
        if session.state.get("branch"):
            return session.state["branch"]
    declared = spec.inputs.get("branch")
    value = run_inputs(run, spec).get("branch")
    return value if declared is not None and declared.type == "branch" and value else ""


def target_branch(run: Run, spec, repository: str) -> str:
    value = run_inputs(run, spec).get("target_branch")
    return value if isinstance(value, str) and value else git.default_branch(repository)


def open_request(run: Run, state) -> ReviewRequest | None:
    """Called as the run ends approved / completed_unreviewed (the caller holds its lock)."""
    repository = run.workdir
    if not git.is_repository(repository):
        run.append_event("review_skipped", reason="the run has no git repository")
        return None
    spec = spec_for(run)
    branch = work_branch(run, spec)
    target = target_branch(run, spec, repository)
    if not branch or branch == target:
        run.append_event(
            "review_skipped", reason=f"no branch besides {target} was worked on", target=target
        )
        return None
    try:
        head, base = git.head(repository, branch), git.head(repository, target)
    except git.GitError as exc:
        run.append_event("review_skipped", reason=str(exc))
        return None
    commits = _commits(repository, branch, target)
    stat = run_git("diff", "--stat", f"{target}...{branch}", cwd=repository).stdout
    diff = run_git("diff", f"{target}...{branch}", cwd=repository).stdout
    review, _ = ReviewRequest.objects.update_or_create(
        run=run,
        defaults={
            "repository": repository,
            "branch": branch,
            "target_branch": target,
            "head_commit": head,
            "target_commit": base,
            "commits": commits,
            "diff_stat": stat.rstrip(),  # each line of git's stat starts with a space
            "diff": diff[:DIFF_LIMIT],
            "diff_truncated": len(diff) > DIFF_LIMIT,
            "push": push(repository, branch) if commits else "",
            "status": ReviewRequest.Status.OPEN,
        },
    )
    if not commits:
        nothing_to_merge(run, review)
        return review
    run.append_event(
        "review_requested",
        branch=branch,
        target=target,
        commits=len(commits),
        pushed=review.push,
        review=review.pk,
    )
    return review


def _commits(repository: str, branch: str, target: str) -> list[dict]:
    """The commits on `branch` that `target` lacks, newest first (at most COMMITS_SHOWN)."""
    log = run_git(
        "log",
        f"--max-count={COMMITS_SHOWN}",
        "--format=%H%x1f%s%x1f%an%x1f%aI",
        f"{target}..{branch}",
        cwd=repository,
    ).stdout
    return [
        dict(zip(("sha", "subject", "author", "date"), line.split("\x1f"), strict=False))
        for line in log.splitlines()
        if line.strip()
    ]


def nothing_to_merge(run: Run, review: ReviewRequest, **by) -> None:
    """The branch holds no commit the target lacks (none was made, or the target took them
    since): the review request is recorded as nothing to merge and no person is asked to
    merge it. An approved run ends `nothing_to_merge` (as a merge ends it `merged`), no
    longer "ready for a person to merge"; `completed_unreviewed`, the recipe's own word, stays
    true and is kept. The caller holds the run's lock."""
    ReviewRequest.objects.filter(pk=review.pk).update(
        status=ReviewRequest.Status.NOTHING_TO_MERGE, last_refusal=""
    )
    review.status, review.last_refusal = ReviewRequest.Status.NOTHING_TO_MERGE, ""
    run.append_event(
        "review_nothing_to_merge",
        branch=review.branch,
        target=review.target_branch,
        review=review.pk,
        **by,
    )
    if run.phase == "approved":
        run.set_phase("nothing_to_merge", **by)


def push(repository: str, branch: str) -> str:
    remotes = run_git("remote", cwd=repository).stdout.split()
    if not remotes:
        return ""
    remote = "origin" if "origin" in remotes else remotes[0]
    result = run_git("push", "--porcelain", remote, f"refs/heads/{branch}", cwd=repository)
    said = (result.stdout + result.stderr).strip().splitlines()
    if result.returncode == 0:
        return f"pushed {branch} to {remote}"
    return f"could not push {branch} to {remote}: {said[-1] if said else result.returncode}"


# --- merging --------------------------------------------------------------------------------


class AlreadyMerged(Conflict):
    """A second merge of a review request (a double-click, a stale page): nothing is done;
    the page says who merged it and when."""

    def __init__(self, review: ReviewRequest):
        self.review = review
        when = timezone.localtime(review.merged_at).strftime("%Y-%m-%d %H:%M:%S")
        super().__init__(f"Already merged by {review.merged_by_name} at {when}.")


class NothingToMerge(git.GitError):
    """The target branch already holds every commit of the branch."""


def merge(run_id: int, actor: Actor) -> ReviewRequest:
    """A person merges the run's review request into its target branch (or, when the target
    took its commits meanwhile, finds nothing to merge: the review's status then says so)."""
    if actor.person is None or actor.surface != "console":
        raise NotAllowed("A person merges a review request, from its page in the console.")
    Actor.operator(actor.person, "console")
    with transaction.atomic():
        run = lock_run(run_id)
        review = ReviewRequest.objects.select_for_update().filter(run_id=run_id).first()
        if run is None or review is None:
            raise NotFound(f"Run {run_id} has no review request.")
        if review.status == ReviewRequest.Status.MERGED:
            raise AlreadyMerged(review)
        if not review.is_open:
            raise Conflict(f"Nothing to merge: {nothing_words(review)}.")
        try:
            commit = _merge(review, actor)
        except NothingToMerge:
            nothing_to_merge(run, review, by=actor.name, surface=actor.surface)
            return review
        except git.GitError as exc:
            refusal = str(exc)
        else:
            refusal = ""
            _record_merge(run, review, actor, commit)
    if refusal:
        # Recorded on its own: the merge is refused, the refusal is history.
        with transaction.atomic():
            run = lock_run(run_id)
            ReviewRequest.objects.filter(pk=review.pk).update(last_refusal=refusal)
            run.append_event("review_merge_refused", reason=refusal, by=actor.name)
        raise Conflict(f"Not merged: {refusal}.")
    return review


def nothing_words(review: ReviewRequest) -> str:
    return f"{review.target_branch} already contains {review.branch}"


def _record_merge(run: Run, review: ReviewRequest, actor: Actor, commit: str) -> None:
    now = timezone.now()
    fields = {
        "status": ReviewRequest.Status.MERGED,
        "merged_by": actor.person,
        "merged_by_name": actor.name,
        "merged_at": now,
        "merge_commit": commit,
        "last_refusal": "",
    }
    ReviewRequest.objects.filter(pk=review.pk).update(**fields)
    for name, value in fields.items():
        setattr(review, name, value)
    run.append_event(
        "review_merged",
        branch=review.branch,
        target=review.target_branch,
        commit=commit,
        by=actor.name,
        surface=actor.surface,
    )
    if run.phase in ("approved", "completed_unreviewed"):
        # Its status stays completed; the header, the runs list, the inbox and `loop
        # status` say merged.
        run.set_phase("merged", by=actor.name, surface=actor.surface)


def _merge(review: ReviewRequest, actor: Actor) -> str:
    repository, branch, target = review.repository, review.branch, review.target_branch
    if not git.is_repository(repository):
        raise git.GitError(f"the repository {repository} is gone")
    head = git.head(repository, branch)
    base = git.head(repository, target)
    if run_git("merge-base", "--is-ancestor", head, base, cwd=repository).returncode == 0:
        raise NothingToMerge(nothing_words(review))
    found = run_git(
        "merge-tree", "--write-tree", "--name-only", "--no-messages", base, head, cwd=repository
    )
    lines = found.stdout.splitlines()
    if found.returncode == 1:
        files = ", ".join(line for line in lines[1:] if line.strip()) or "some files"
        raise git.GitError(
            f"merging {branch} into {target} conflicts in {files}: nothing was merged; "
            f"rebase {branch} on {target} (or resolve it in the repository) and merge again"
        )
    if found.returncode != 0 or not lines:
        raise git.GitError(f"git merge-tree failed: {found.stderr.strip()[:300]}")
    message = f"Merge {branch} into {target} (loop run {review.run_id}, merged by {actor.name})"
    checked_out = _checked_out(repository, target)
    if checked_out is not None:
        if git.dirty(checked_out, repository):
            raise git.GitError(
                f"{target} is checked out in {checked_out} with uncommitted changes: commit or "
                "stash them, then merge"
            )
        where = {"cwd": checked_out, "repository": repository}
        done = run_git("merge", "--no-ff", "-m", message, head, **where)
        if done.returncode != 0:
            run_git("merge", "--abort", **where)
            raise git.GitError(f"git merge failed: {(done.stdout + done.stderr).strip()[-300:]}")
        return git.head(repository, target)
    commit = run_git(
        "commit-tree", lines[0].strip(), "-p", base, "-p", head, "-m", message, cwd=repository
    )
    if commit.returncode != 0:
        raise git.GitError(f"git commit-tree failed: {commit.stderr.strip()[:300]}")
    new = commit.stdout.strip()
    moved = run_git("update-ref", f"refs/heads/{target}", new, base, cwd=repository)
    if moved.returncode != 0:
        raise git.GitError(f"{target} moved while merging; try again")
    return new


def _checked_out(repository: str, branch: str) -> str | None:
    listing = run_git("worktree", "list", "--porcelain", cwd=repository).stdout
    path = None
    for line in listing.splitlines():
        if line.startswith("worktree "):
            path = line.split(" ", 1)[1]
        elif line == f"branch refs/heads/{branch}":
            return path
    return None
