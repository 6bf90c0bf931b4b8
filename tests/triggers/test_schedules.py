"""Schedules through a real worker running beat (django-celery-beat's database schedule):
each concurrency policy, a paused schedule, downtime and a restarted beat."""

from __future__ import annotations

import signal
from datetime import timedelta

import pytest
from django.utils import timezone

from runs import services
from runs.actor import Actor
from runs.models import Run
from tests.conftest import wait_for, wait_run
from triggers.models import Schedule, ScheduleFiring
from triggers.schedules import SENT_AGAIN

GATE = """
name: wait for a person
nodes:
  - id: ask
    approval:
      message: Go on?
"""
QUICK = """
name: quick
nodes:
  - id: say
    bash: echo hello
"""


@pytest.fixture
def gate_recipe(make_recipe):
    return make_recipe(GATE, slug="scheduled-gate")


def schedule(recipe, every=2, **fields) -> Schedule:
    return Schedule.objects.create(
        recipe=recipe, name="every few seconds", every_seconds=every, **fields
    )


def firings(sched, outcome=None):
    found = ScheduleFiring.objects.filter(schedule=sched)
    return list(found.filter(outcome=outcome) if outcome else found)


def runs_of(sched) -> list[Run]:
    return list(
        Run.objects.filter(pk__in=[f.run_id for f in firings(sched) if f.run_id]).order_by("pk")
    )


def stop(run, operator):
    services.cancel_run(run, Actor.operator(operator, "console"), reason="done looking")


def test_skip_starts_nothing_while_its_run_waits_then_starts_again(
    beat_worker, gate_recipe, operator, client
):
    sched = schedule(gate_recipe, concurrency=Schedule.Concurrency.SKIP)
    first = wait_for(lambda: runs_of(sched), message="the first scheduled run")[0]
    assert first.started_by_name == "schedule 'every few seconds'"
    wait_run(first, "paused")
    client.force_login(operator)  # the inbox's gate row names who started the run
    inbox = client.get("/").content.decode()
    starter = '<span class="muted starter">by schedule &#x27;every few seconds&#x27;</span>'
    assert f"Run {first.pk}</a> {starter}" in inbox
    still_going = f"run {first.pk} of this schedule is still going"
    # On a busy machine beat may also send a firing twice, recorded as SENT_AGAIN: the
    # skip this test is about is the one that names the waiting run.
    wait_for(
        lambda: any(f.note == still_going for f in firings(sched, "skipped")),
        message="a firing skipped while run 1 waits",
    )
    assert len(runs_of(sched)) == 1
    assert {f.note for f in firings(sched, "skipped")} <= {still_going, SENT_AGAIN}
    stop(first, operator)
    wait_for(lambda: len(runs_of(sched)) == 2, message="a run once the first ended")


def test_queue_keeps_one_firing_until_the_run_ends(beat_worker, gate_recipe, operator):
    sched = schedule(gate_recipe, concurrency=Schedule.Concurrency.QUEUE)
    first = wait_for(lambda: runs_of(sched), message="the first scheduled run")[0]
    wait_for(lambda: firings(sched, "queued"), message="a queued firing")
    wait_for(
        lambda: any(f.note == "a firing is already queued" for f in firings(sched, "skipped")),
        message="a second firing skipped: one is queued already",
    )
    queued = firings(sched, "queued")[0]
    stop(first, operator)
    # The queued firing itself starts the next run, as soon as the first one ends.
    wait_for(lambda: ScheduleFiring.objects.get(pk=queued.pk).run_id, message="the queued run")
    second = ScheduleFiring.objects.get(pk=queued.pk)
    assert second.outcome == "started" and second.run_id != first.pk


def test_cancel_previous_cancels_the_waiting_run(beat_worker, gate_recipe):
    sched = schedule(gate_recipe, concurrency=Schedule.Concurrency.CANCEL_PREVIOUS)
    first = wait_for(lambda: runs_of(sched), message="the first scheduled run")[0]
    wait_for(lambda: len(runs_of(sched)) >= 2, message="a second run")
    first.refresh_from_db()
    assert first.status == Run.Status.CANCELLED
    assert first.error == "the schedule started a new run"
    cancelled = first.events.filter(kind="run_cancelled").first()
    assert cancelled.data["by"] == "schedule 'every few seconds'"


def test_a_paused_schedule_starts_nothing(beat_worker, make_recipe):
    quick = make_recipe(QUICK, slug="quick")
    running = schedule(quick, every=1)
    paused = schedule(quick, every=1, enabled=False)
    wait_for(lambda: len(firings(running)) >= 3, message="three firings of the running one")
    assert firings(paused) == []
    assert not paused.periodic_task.enabled


def test_after_downtime_one_run_starts_for_the_missed_firings(beat_worker, make_recipe):
    """Beat was down for a minute: when it is back, one run starts, and its log says how
    many firings it stands for."""
    quick = make_recipe(QUICK, slug="quick")
    sched = schedule(quick, every=600, enabled=False)
    minute_ago = timezone.now() - timedelta(seconds=3000)
    Schedule.objects.filter(pk=sched.pk).update(last_fired_at=minute_ago)
    sched.refresh_from_db()
    sched.enabled = True
    sched.save()  # beat's entry, never run before: due at once
    type(sched.periodic_task).objects.filter(pk=sched.periodic_task_id).update(
        last_run_at=minute_ago
    )
    run = wait_for(lambda: runs_of(sched), message="the late firing's run")[0]
    missed = run.events.get(kind="schedule_missed")
    assert missed.data["missed"] == 4  # due at 600, 1200, 1800 and 2400 s: this one is 3000
    assert len(firings(sched)) == 1


def test_a_restarted_beat_does_not_start_the_same_firing_twice(beat_worker, make_recipe):
    """Beat saves when it last sent only now and then: killed before saving, it sends the
    same firing again when it comes back. The schedule's own record refuses it."""
    from django_celery_beat.models import PeriodicTask

    quick = make_recipe(QUICK, slug="quick")
    sched = schedule(quick, every=120)
    stale = timezone.now() - timedelta(hours=1)  # what a beat that never saved reads
    PeriodicTask.objects.filter(pk=sched.periodic_task_id).update(last_run_at=stale)
    wait_for(lambda: runs_of(sched), message="the first firing's run")

    def never_saved():  # while beat is down: it reads this when it starts, not before
        PeriodicTask.objects.filter(pk=sched.periodic_task_id).update(last_run_at=stale)

    beat_worker.restart(signal.SIGKILL, while_down=never_saved)
    wait_for(
        lambda: any(f.note == SENT_AGAIN for f in firings(sched, "skipped")),
        message="the restarted beat's copy of the firing, refused",
    )
    assert len(runs_of(sched)) == 1
