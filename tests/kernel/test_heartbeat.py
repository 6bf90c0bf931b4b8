"""After an agent returns, the worker may still work for a while without printing anything
(recording the worktree's diff with git, checking signals in a long output). The lease is
renewed meanwhile, so the sweep never takes the iteration back and runs it twice."""

from __future__ import annotations

import os
import subprocess
import threading
from datetime import timedelta

from django.db import connection
from django.utils import timezone

from runs import services
from runs.actor import ENGINE
from runs.executor.sweep import sweep
from runs.models import Iteration
from tests.conftest import wait_for

RECIPE = """
name: slow-diff
provider: editor
providers:
  editor: {kind: command, command: 'echo more >> notes.txt; echo "<promise>DONE</promise>"'}
nodes:
  - id: work
    loop:
      prompt: Add a line.
      until: DONE
      max_iterations: 2
"""


def _git(*args, cwd):
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def _slow_git(folder, real_git: str):
    """A `git` that stops at `git status` (the first command of recording a diff) until
    the test lets it go: the post-processing takes as long as the test wants."""
    folder.mkdir()
    script = folder / "git"
    script.write_text(
        "#!/bin/sh\n"
        'for arg in "$@"; do\n'
        '  if [ "$arg" = status ]; then\n'
        f"    touch {folder}/blocked\n"
        f"    while [ ! -e {folder}/release ]; do sleep 0.05; done\n"
        "  fi\n"
        "done\n"
        f'exec {real_git} "$@"\n'
    )
    script.chmod(0o755)


def test_recording_a_worktree_diff_keeps_the_lease(
    transactional_db, make_recipe, broker, settings, tmp_path, monkeypatch
):
    settings.LOOP_LEASE_SECONDS = 1
    repo = tmp_path / "repo"
    repo.mkdir()
    _git("init", "-q", "-b", "main", cwd=repo)
    (repo / "notes.txt").write_text("start\n")
    _git("add", ".", cwd=repo)
    _git("commit", "-q", "-m", "first", cwd=repo)
    real_git = subprocess.run(["which", "git"], capture_output=True, text=True).stdout.strip()
    fake = tmp_path / "fake-bin"
    _slow_git(fake, real_git)
    monkeypatch.setenv("LOOP_GIT_WORKTREES", "1")
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    # The console's git on the agent's tree runs in the sandbox: it must find this git
    # there, and leave its mark where the test sees it.
    settings.LOOP_SANDBOX_WRITE = [str(fake)]

    run = services.start_run(
        make_recipe(RECIPE, "slow-diff"), actor=ENGINE, message="go", workdir=str(repo)
    )
    failures = []

    def work():
        try:
            broker.deliver()
        except Exception as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
        finally:
            connection.close()

    worker = threading.Thread(target=work)
    worker.start()
    try:
        wait_for(
            lambda: (sweep() or True) and (fake / "blocked").exists(),
            120,
            message="the diff recording to start",
        )
        # The agent has returned and git is busy: keep sweeping until the lease the
        # iteration had when git started has long expired.
        blocked_at = timezone.now()
        wait_for(
            lambda: (
                (sweep() or True)
                and timezone.now() > blocked_at + timedelta(seconds=3 * settings.LOOP_LEASE_SECONDS)
            ),
            30,
            message="three lease periods to pass",
        )
        it = Iteration.objects.get(run=run, number=1)
        assert it.status == "running" and it.attempts == 1
        assert it.lease_expires_at > blocked_at + timedelta(seconds=settings.LOOP_LEASE_SECONDS)
    finally:
        (fake / "release").touch()
        worker.join(120)
    assert not failures, failures
    run.refresh_from_db()
    assert run.status == "completed", run.error
    it = Iteration.objects.get(run=run, number=1)
    assert it.attempts == 1 and it.status == "completed"
    assert run.events.filter(kind="worktree_diff").count() == 1
    assert not run.events.filter(kind__in=["iteration_requeued", "node_requeued"]).exists()


def _repository(path):
    path.mkdir()
    _git("init", "-q", "-b", "main", cwd=path)
    (path / "notes.txt").write_text("start\n")
    _git("add", ".", cwd=path)
    _git("commit", "-q", "-m", "first", cwd=path)
    return path


def test_a_call_taken_back_while_git_ran_leaves_no_worktree_diff(
    transactional_db, make_recipe, broker, tmp_path, monkeypatch
):
    """The diff is the call's result like its answer: logged by the transaction that
    finishes the call, after the ownership check, never by the provider wrapper."""
    from django.db.models import F

    from runs import worktree

    repo = _repository(tmp_path / "repo")
    monkeypatch.setenv("LOOP_GIT_WORKTREES", "1")
    run = services.start_run(
        make_recipe(RECIPE, "taken-back"), actor=ENGINE, message="go", workdir=str(repo)
    )
    record = worktree.record_changes
    taken_back = []

    def record_after_a_take_back(workdir, **where):
        # As if the sweep took the iteration back (a new attempt) while git was busy.
        if not taken_back:
            taken_back.append(
                Iteration.objects.filter(run=run, status="running").update(
                    attempts=F("attempts") + 1
                )
            )
        return record(workdir, **where)

    monkeypatch.setattr(worktree, "record_changes", record_after_a_take_back)
    broker.deliver()
    assert taken_back == [1]
    it = Iteration.objects.get(run=run, number=1)
    assert it.status == "running" and it.attempts == 2  # the first call's result was dropped
    assert not run.events.filter(kind="worktree_diff").exists()
    assert not run.events.filter(kind="iteration_completed").exists()


def test_a_call_that_keeps_its_claim_logs_its_worktree_diff_once(
    transactional_db, make_recipe, broker, tmp_path, monkeypatch
):
    repo = _repository(tmp_path / "repo")
    monkeypatch.setenv("LOOP_GIT_WORKTREES", "1")
    run = services.start_run(
        make_recipe(RECIPE, "kept"), actor=ENGINE, message="go", workdir=str(repo)
    )
    broker.deliver()
    run.refresh_from_db()
    assert run.status == "completed", run.error
    (diff,) = run.events.filter(kind="worktree_diff")
    assert diff.data["iteration"] == 1 and "+more" in diff.data["diff"]
    assert diff.seq < run.events.get(kind="iteration_completed").seq
