"""A step-machine turn run again after its worker was lost is told plainly what the lost
attempt left (commits since the turn began, uncommitted files), and the turn's diff counts
from where the turn began. The demo agent reads that note: a fix already committed by the
lost attempt is not a failure it cannot fix (the soak's run 34 ended `needs_human`)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from loops.stepmachine import demo, turns
from loops.stepmachine.context import RERUN_HEADING
from runs.actor import Actor
from runs.executor.state import lock_run
from runs.executor.sweep import sweep
from runs.models import Iteration, NodeRun
from tests.python.scripted import ScriptedProvider
from tests.stepmachine.conftest import git

pytestmark = pytest.mark.django_db(transaction=True)

ONE_TURN = """
schema: planeai.loop.recipe.v1
id: one-turn
name: Fix it
roles:
  maker: {mode: write, isolation: project, provider: demo}
steps:
  - {id: make, kind: session.create, role: maker, prompt: Fix it.}
  - {id: wait_make, kind: handoff.wait, from: maker, on: {completed: done}}
  - {id: done, kind: loop.status, status: approved}
"""


def lost_first_attempt(run, repo):
    """Attempt 1 claims the turn, commits a fix and leaves a file, then its worker dies."""
    it = Iteration.objects.get(run=run, node_id="maker", number=1)
    # As run_turn records it for a role sharing the project's tree: the tree's snapshot
    # (kept in the run's data folder) and the commit it was at.
    head = git("rev-parse", "HEAD", cwd=repo).strip()
    store = Path(settings.LOOP_DATA_DIR) / "runs" / str(run.pk) / "snapshots" / "maker"
    base = turns._snapshot(str(repo), store)
    with transaction.atomic():
        locked = lock_run(run.pk)
        assert it.start(locked, it.prompt, None)
        turns.turn_began(it.node_run, it, base=base, head=head)
    (repo / "fix.txt").write_text("fixed\n")
    git("add", "fix.txt", cwd=repo)
    git("commit", "-q", "-m", "fix: the lost attempt's fix", cwd=repo)
    (repo / "notes.txt").write_text("half done\n")
    long_ago = timezone.now() - timedelta(hours=1)
    Iteration.objects.filter(pk=it.pk).update(lease_expires_at=long_ago)
    assert sweep()["requeued"] == 1
    return Iteration.objects.select_related("run", "node_run").get(pk=it.pk)


def test_a_re_run_turn_is_told_what_the_lost_attempt_left(
    offline_broker, plane_recipe, operator, repo, monkeypatch
):
    from runs import services

    provider = ScriptedProvider(lambda request, count: "looked at the tree: done")
    monkeypatch.setattr(turns.registry, "resolve", lambda *args: provider)
    run = services.start_run(
        plane_recipe(ONE_TURN), actor=Actor.operator(operator, "console"), workdir=str(repo)
    )
    offline_broker.run_all(skip={"run_iteration"})
    it = lost_first_attempt(run, repo)
    first = NodeRun.objects.get(pk=it.node_run_id).state["turn_began"]

    turns.run_turn(it)

    prompt = provider.requests[0].prompt
    assert prompt.startswith(RERUN_HEADING)
    assert "fix: the lost attempt's fix" in prompt and "notes.txt" in prompt
    it.refresh_from_db()
    assert (it.status, it.attempts) == ("completed", 2)
    diff = run.events.get(kind="worktree_diff")
    assert "fix.txt" in diff.data["stat"] and "notes.txt" in diff.data["stat"]
    # The turn's base stays the first attempt's (kept on the session's row, not redone).
    began = NodeRun.objects.get(pk=it.node_run_id).state["turn_began"]
    assert began == first and began["base"]


def test_a_first_attempt_is_not_told_anything(
    offline_broker, plane_recipe, operator, repo, monkeypatch
):
    from runs import services

    provider = ScriptedProvider(lambda request, count: "done")
    monkeypatch.setattr(turns.registry, "resolve", lambda *args: provider)
    run = services.start_run(
        plane_recipe(ONE_TURN), actor=Actor.operator(operator, "console"), workdir=str(repo)
    )
    offline_broker.run_all(skip={"run_iteration"})
    turns.run_turn(Iteration.objects.select_related("run", "node_run").get(run=run))
    assert RERUN_HEADING not in provider.requests[0].prompt
    began = NodeRun.objects.get(run=run, node_id="maker").state["turn_began"]
    assert began["head"] == git("rev-parse", "HEAD~0", cwd=repo).strip()
    assert began["base"]  # the shared tree's snapshot, where the turn's diff counts from


def test_the_demo_agent_finds_its_fix_already_made_on_a_re_run(tmp_path):
    repo = demo.create_repository(tmp_path)
    git("checkout", "-q", demo.FEATURE_BRANCH, cwd=repo)
    assert demo._fix(str(repo))[0] == "completed"  # the lost attempt fixed and committed
    assert demo._fix(str(repo))[0] == "needs_human"  # what a re-run used to conclude
    status, summary = demo._fix(str(repo), rerun=True)
    assert status == "completed" and "already fixed" in summary
