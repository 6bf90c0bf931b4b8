"""A Python loop's `workflow` node counts lost workers, not gates: each decision wakes the
node and a worker claims it again, which is no lost worker; one kill after two gates is
taken back, not failed as "worker lost 3 times". A run the sweep fails leaves nothing
`running`. Rows are set up as a worker leaves them; tasks run here, in order."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from recipes.editing import create_recipe
from recipes.models import Recipe
from runs import dispatch, services
from runs.actor import ENGINE
from runs.executor import scheduler
from runs.executor.state import lock_run
from runs.executor.sweep import sweep
from runs.models import Iteration, NodeRun

pytestmark = pytest.mark.django_db(transaction=True)

SOURCE = '''"""One writer"""
from loops.python import Agent

workflow = Agent("writer", "Write.", provider="demo")
'''


@pytest.fixture
def sent(monkeypatch):
    messages: list = []
    monkeypatch.setattr(dispatch, "deliver", lambda name, *args: messages.append((name, args)))
    return messages


@pytest.fixture
def python_run(sent, tmp_path):
    """A Python run whose `workflow` node is queued (its start_node not delivered)."""
    path = tmp_path / "one_writer.py"
    path.write_text(SOURCE)
    recipe, _ = create_recipe(
        SOURCE, slug="one-writer", origin=Recipe.Origin.PROJECT, source_path=str(path)
    )
    run = services.start_run(recipe, actor=ENGINE, message="Write")
    scheduler.advance_run(run.pk)
    sent.clear()
    return run


def in_a_call(run, *, attempts: int, wakes: int):
    """The worker holding the node (claimed `attempts` times, `wakes` of them after a
    decision) was lost in the writer's call: the lease has run out."""
    workflow = NodeRun.objects.get(run=run, node_id="workflow")
    long_ago = timezone.now() - timedelta(hours=1)
    NodeRun.objects.filter(pk=workflow.pk).update(
        status="running",
        attempts=attempts,
        state={NodeRun.WAKES: wakes} if wakes else {},
        lease_expires_at=long_ago,
    )
    writer = NodeRun.objects.create(run=run, node_id="writer", kind="agent", status="running")
    Iteration.objects.create(
        run=run, node_run=writer, node_id="writer", number=3, status="running", attempts=1
    )


def test_a_claim_after_a_decision_is_not_a_lost_worker(python_run):
    workflow = NodeRun.objects.get(run=python_run, node_id="workflow")
    assert NodeRun.objects.claim(workflow.pk)
    for _ in range(2):  # two gates: suspended, decided, claimed again
        with transaction.atomic():
            run = lock_run(python_run.pk)
            workflow.refresh_from_db()
            assert workflow.suspend(run, attempt=workflow.attempts)
            assert workflow.wake(run)
        assert NodeRun.objects.claim(workflow.pk)
    workflow.refresh_from_db()
    assert (workflow.attempts, workflow.workers_lost) == (3, 1)


def test_one_lost_worker_after_two_gates_is_taken_back(python_run, sent, settings):
    settings.LOOP_MAX_ATTEMPTS = 3
    in_a_call(python_run, attempts=3, wakes=2)
    counts = sweep()
    assert (counts["requeued"], counts["failed"]) == (1, 0)
    workflow = NodeRun.objects.get(run=python_run, node_id="workflow")
    assert workflow.status == "pending"
    assert ("start_node", (workflow.pk,)) in sent


def test_a_run_failed_for_lost_workers_leaves_nothing_running(python_run, sent, settings):
    settings.LOOP_MAX_ATTEMPTS = 3
    in_a_call(python_run, attempts=3, wakes=0)
    assert sweep()["failed"] == 1
    assert ("advance_run", (python_run.pk,)) in sent
    scheduler.advance_run(python_run.pk)
    python_run.refresh_from_db()
    assert python_run.status == "failed"
    assert "worker lost 3 times" in python_run.error
    assert not NodeRun.objects.filter(run=python_run, status__in=NodeRun.UNFINISHED).exists()
    assert not Iteration.objects.filter(run=python_run, status__in=["pending", "running"]).exists()
