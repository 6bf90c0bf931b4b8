"""The sweep's passes on rows built by hand: a loop_group's completion check (claimed once,
given back when its worker vanished, failed at the attempt limit), and "stalled" runs
(only a run with nothing running, pending or paused gets an `advance_run`)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.executor.sweep import sweep
from runs.models import Iteration, NodeRun, Run
from tests.console.conftest import add_iteration, guided_run  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db(transaction=True)


def long_ago():
    return timezone.now() - timedelta(hours=1)


def checking_group(run, *, attempts=1, lease=None):
    """A loop_group whose body finished and whose completion check was claimed."""
    group = NodeRun.objects.create(
        run=run,
        node_id="polish",
        kind="loop_group",
        status="running",
        iteration_count=1,
        max_iterations=3,
        state={"phase": "checking"},
    )
    NodeRun.objects.create(
        run=run, node_id="polish.draft", kind="bash", iteration=1, status="completed"
    )
    it = add_iteration(run, group, 1, status="running", attempts=attempts)
    Iteration.objects.filter(pk=it.pk).update(lease_expires_at=lease)
    it.refresh_from_db()
    return group, it


def idle(run):
    Run.objects.filter(pk=run.pk).update(updated_at=long_ago())


def test_a_completion_check_is_claimed_once(broker, guided_run):  # noqa: F811
    run, _ = guided_run
    _, it = checking_group(run, attempts=0)
    again = Iteration.objects.get(pk=it.pk)
    assert it.claim_check() is True
    assert again.claim_check() is False  # a duplicate delivery finds it taken
    it.refresh_from_db()
    assert it.attempts == 1 and it.lease_expires_at is not None


def test_a_check_whose_worker_vanished_is_sent_again(broker, guided_run):  # noqa: F811
    run, _ = guided_run
    group, it = checking_group(run, attempts=1, lease=long_ago())
    counts = sweep()
    it.refresh_from_db()
    assert counts["requeued"] == 1
    assert it.status == "running" and it.lease_expires_at is None
    assert ("workflow.finish_group_iteration", (group.pk, 1)) in broker.sent


def test_a_check_that_lost_its_worker_too_often_fails_the_group(
    broker,
    guided_run,  # noqa: F811
    settings,
):
    run, _ = guided_run
    # The group's start is the iteration's first attempt; each check claimed adds one.
    group, it = checking_group(run, attempts=settings.LOOP_MAX_ATTEMPTS + 1, lease=long_ago())
    counts = sweep()
    it.refresh_from_db()
    group.refresh_from_db()
    assert counts["failed"] == 1
    assert it.status == "failed" and "completion check: worker lost" in it.error
    assert group.status == "failed" and "completion check" in group.error
    assert ("advance_run", (run.pk,)) in broker.sent


def test_a_long_healthy_loop_is_not_advanced(broker, guided_run):  # noqa: F811
    run, row = guided_run
    add_iteration(run, row, 1, status="running", attempts=1)
    Iteration.objects.filter(run=run).update(lease_expires_at=timezone.now() + timedelta(minutes=5))
    idle(run)
    broker.sent.clear()  # the run's own start
    assert sweep()["advanced"] == 0
    assert broker.count("advance_run") == 0


def test_a_group_running_its_completion_check_is_not_advanced(broker, guided_run):  # noqa: F811
    run, row = guided_run
    NodeRun.objects.filter(pk=row.pk).update(status="completed")
    checking_group(run, lease=timezone.now() + timedelta(minutes=5))
    idle(run)
    broker.sent.clear()  # the run's own start
    assert sweep()["advanced"] == 0
    assert broker.count("advance_run") == 0


def test_a_run_with_nothing_left_to_do_is_advanced(broker, guided_run):  # noqa: F811
    """Every node finished but the run still says running: its advance_run was lost."""
    run, row = guided_run
    NodeRun.objects.filter(pk=row.pk).update(status="completed")
    idle(run)
    broker.sent.clear()  # the run's own start
    assert sweep()["advanced"] == 1
    assert broker.sent == [("advance_run", (run.pk,))]
