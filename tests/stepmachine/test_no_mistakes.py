"""The builtin no-mistakes pipeline end to end on the demo repository, through a real
worker: rebase → review → tests fail → fix → review → tests pass → document → lint →
review request; then a person merges it, or is refused on a conflict."""

from pathlib import Path

import pytest

from loops.stepmachine import review
from loops.stepmachine.demo import FEATURE_BRANCH, create_repository
from loops.stepmachine.models import ReviewRequest
from runs import services
from runs.actor import Actor
from runs.models import ProviderConfig
from tests.stepmachine.conftest import events, git, settled

PIPELINE = [
    "rebase",
    "wait_for_rebase",
    "create_reviewer",
    "wait_for_review",
    "run_tests",
    "tests_failed",
    "wait_for_test_fix",
    "increment_round_after_tests",
    "create_reviewer",
    "wait_for_review",
    "run_tests",
    "run_document_check",
    "wait_for_document",
    "run_lint",
    "push_and_pr",
    "wait_for_push",
    "completed_unreviewed",
]


def start(bundled, operator, slug, repository: Path):
    return services.start_run(
        bundled[slug],
        actor=Actor.operator(operator, "console"),
        inputs={"branch": FEATURE_BRANCH},
        workdir=str(repository),
    )


def test_the_verbatim_builtin_runs_end_to_end_with_the_default_provider(
    live_worker, bundled, operator, tmp_path
):
    ProviderConfig.objects.create(name="house-demo", kind="demo", is_default=True)
    bundled["no-mistakes"].refresh_from_db()  # runnable now: a default provider answers
    repository = create_repository(tmp_path)
    run = start(bundled, operator, "no-mistakes", repository)
    settled(run, "approved", timeout=300)
    assert [e.step for e in events(run, "tick")] == PIPELINE
    assert [e.data["result"] for e in events(run, "gates_finished")] == ["fail", "pass", "pass"]
    assert [e.data["gates"] for e in events(run, "gates_started")] == [["test"], ["test"], ["lint"]]
    second_review = run.iterations.get(node_id="reviewer", number=2)
    assert "Round: 2" in second_review.prompt
    # the gatekeeper's fix handoff became runtime.last_error for the next review prompt
    assert "Previous fixes applied: Fixed the root cause in greeting.py" in second_review.prompt
    sessions = {
        (s.node_id, s.generation): s.iteration_count for s in run.nodes.filter(kind="session")
    }
    assert sessions == {("gatekeeper", 0): 4, ("reviewer", 0): 2}  # both reused their session
    request = ReviewRequest.objects.get(run=run)
    assert (request.branch, request.target_branch, request.status) == (
        FEATURE_BRANCH,
        "main",
        "open",
    )
    assert [c["subject"] for c in request.commits] == [
        "docs: document greet() in the README",
        "fix: greet() says hello with a comma and an exclamation mark",
        "feat: greet people by name",
    ]
    assert 'return f"Hello, {name}!"' in request.diff
    assert request.push == ""  # no remote

    merged = review.merge(run.pk, Actor.operator(operator, "console"))
    assert merged.status == "merged" and merged.merged_by == operator
    assert 'f"Hello, {name}!"' in git("show", "main:greeting.py", cwd=repository)
    assert "greet(name)" in git("show", "main:README.md", cwd=repository)
    parents = git("show", "-s", "--format=%P", "main", cwd=repository).split()
    assert len(parents) == 2  # a merge commit
    (event,) = events(run, "review_merged")
    assert (event.data["by"], event.data["surface"]) == ("otto", "console")
    with pytest.raises(services.Conflict, match="Already merged by otto"):
        review.merge(run.pk, Actor.operator(operator, "console"))


def test_a_conflict_is_refused_clearly_and_nothing_is_merged(
    live_worker, bundled, operator, tmp_path
):
    repository = create_repository(tmp_path)
    remote = tmp_path / "remote.git"
    git("init", "-q", "--bare", str(remote), cwd=tmp_path)
    git("remote", "add", "origin", str(remote), cwd=repository)
    run = start(bundled, operator, "no-mistakes-demo", repository)
    settled(run, "approved", timeout=300)
    request = ReviewRequest.objects.get(run=run)
    assert request.push == f"pushed {FEATURE_BRANCH} to origin"
    assert git("rev-parse", FEATURE_BRANCH, cwd=remote).strip() == request.head_commit
    # Meanwhile someone puts a different greeting.py on main.
    git("worktree", "add", "-q", str(tmp_path / "main-tree"), "main", cwd=repository)
    (tmp_path / "main-tree" / "greeting.py").write_text("def greet(name):\n    return name\n")
    git("add", "greeting.py", cwd=tmp_path / "main-tree")
    git("commit", "-q", "-m", "a rival greeting", cwd=tmp_path / "main-tree")
    before = git("rev-parse", "main", cwd=repository)
    with pytest.raises(services.Conflict, match="conflicts in greeting.py"):
        review.merge(run.pk, Actor.operator(operator, "console"))
    assert git("rev-parse", "main", cwd=repository) == before
    request.refresh_from_db()
    assert request.status == "open" and "conflicts in greeting.py" in request.last_refusal
    assert events(run, "review_merge_refused")
    # Resolved on main (the rival commit reverted there): the merge goes through, into the
    # checked-out main, whose files follow.
    git("revert", "--no-edit", "HEAD", cwd=tmp_path / "main-tree")
    review.merge(run.pk, Actor.operator(operator, "console"))
    assert "Hello, {name}!" in (tmp_path / "main-tree" / "greeting.py").read_text()
