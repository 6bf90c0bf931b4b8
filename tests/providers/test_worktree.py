"""A run started on a git repository works in its own worktree and records each
iteration's diff."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from runs import worktree
from runs.models import RunEvent
from tests.conftest import wait_run

RECIPE = """
name: edit-loop
provider: editor
providers:
  editor: {kind: command, command: 'echo "iteration $LOOP_ITERATION" >> notes.txt; echo edited'}
nodes:
  - id: work
    loop:
      prompt: Add a line to notes.txt.
      until_bash: test $(wc -l < notes.txt) -ge 2
      max_iterations: 3
"""


def git(*args, cwd) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture
def repo(tmp_path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git("init", "-q", "-b", "main", cwd=path)
    (path / "README.md").write_text("hello\n")
    git("add", ".", cwd=path)
    git("commit", "-q", "-m", "first", cwd=path)
    return path


def test_each_run_gets_its_own_worktree_and_iteration_diffs(live_worker, start, repo):
    runs = [start(RECIPE, workdir=str(repo)), start(RECIPE, workdir=str(repo), slug="again")]
    for run in runs:
        assert Path(run.workdir) == worktree.path_for(run.pk)
        wait_run(run)
        assert run.status == "completed", run.error
    assert not (repo / "notes.txt").exists()  # the user's checkout is untouched
    first = runs[0]
    log = git("log", "--format=%s", f"loop/run-{first.pk}", cwd=repo).splitlines()
    assert log[:2] == [
        f"loop run {first.pk}: work iteration 2",
        f"loop run {first.pk}: work iteration 1",
    ]
    diffs = list(RunEvent.objects.filter(run=first, kind="worktree_diff").order_by("seq"))
    assert [d.data["iteration"] for d in diffs] == [1, 2]
    assert "notes.txt" in diffs[0].data["stat"]
    assert "+iteration 2" in diffs[1].data["diff"] and "+iteration 1" not in diffs[1].data["diff"]
    assert git("rev-parse", f"loop/run-{runs[1].pk}", cwd=repo) != git(
        "rev-parse", f"loop/run-{first.pk}", cwd=repo
    )


@pytest.mark.django_db
def test_folders_that_are_not_a_repository_top_are_left_alone(
    start, repo, tmp_path, django_capture_on_commit_callbacks
):
    plain = tmp_path / "plain"
    plain.mkdir()
    inside = repo / "sub"
    inside.mkdir()
    with django_capture_on_commit_callbacks(execute=True):
        runs = [start(RECIPE, workdir=str(plain)), start(RECIPE, workdir=str(inside), slug="in")]
    assert [r.workdir for r in runs] == [str(plain), str(inside)]


@pytest.mark.django_db
def test_worktrees_are_off_unless_enabled(
    start, repo, monkeypatch, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        run = start(RECIPE, workdir=str(repo))
    assert Path(run.workdir) == worktree.path_for(run.pk)
    monkeypatch.delenv("LOOP_GIT_WORKTREES")
    with django_capture_on_commit_callbacks(execute=True):
        assert start(RECIPE, workdir=str(repo), slug="off").workdir == str(repo)


@pytest.mark.django_db
def test_a_worktree_that_cannot_be_made_fails_the_run_clearly(
    start, tmp_path, django_capture_on_commit_callbacks
):
    empty = tmp_path / "empty"
    empty.mkdir()
    git("init", "-q", cwd=empty)  # no commit yet: there is no HEAD to branch from
    with django_capture_on_commit_callbacks(execute=True):
        run = start(RECIPE, workdir=str(empty))
    run.refresh_from_db()
    assert run.status == "failed" and "could not give the run its own git worktree" in run.error


def test_a_fork_works_in_a_worktree_as_the_original_was_at_the_fork_point(
    live_worker, start, repo, operator
):
    from runs import services
    from runs.actor import Actor

    original = start(RECIPE.replace("-ge 2", "-ge 3"), workdir=str(repo))
    wait_run(original)
    assert original.status == "completed", original.error
    assert Path(original.workdir, "notes.txt").read_text().count("iteration") == 3
    fork = services.fork_run(
        original, Actor.operator(operator, "api"), node="work", iteration=1, feedback="again"
    )
    wait_run(fork)
    assert fork.status == "completed", fork.error
    assert Path(fork.workdir) == worktree.path_for(fork.pk)
    # Iteration 1's line was there when the fork began; iterations 2 and 3 ran in the fork.
    notes = Path(fork.workdir, "notes.txt").read_text().splitlines()
    assert notes == ["iteration 1", "iteration 2", "iteration 3"]
    assert git("log", "--format=%s", "-1", f"loop/run-{fork.pk}~2", cwd=repo).strip() == (
        f"loop run {original.pk}: work iteration 1"
    )
    assert not (repo / "notes.txt").exists()
