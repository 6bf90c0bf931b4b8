"""A driven host's turn whose worker is killed again and again (issue 42, the chaos soak's
finding 1): killed three times while it advances, the run completes, each turn going on from
the last one's record and no tool call or step run twice; killed three times with no
progress, it fails as before ("worker lost 3 times (attempt limit 3)")."""

from __future__ import annotations

from collections import Counter

import pytest

from loops.driven.models import HostCall, Loop, LoopIteration
from runs import services
from runs.actor import ENGINE
from runs.models import Iteration, NodeRun, ProviderConfig
from tests.conftest import wait_for
from tests.faults.conftest import assert_recorded_once
from tests.faults.test_every_kind import nothing_left_running
from tests.faults.test_matrix import swept

pytestmark = pytest.mark.worker


@pytest.fixture
def launch_note(bundled, settings):
    settings.LOOP_MAX_ATTEMPTS = 3
    ProviderConfig.objects.get_or_create(
        name="slow-demo", kind="demo", defaults={"options": {"delay": 0.05}}
    )
    return bundled["launch-note"]


def host_turn_running(run, after: int):
    """The host's turn running under a claim later than `after` (its row's attempts)."""
    host = NodeRun.objects.filter(run=run, node_id="host").first()
    if host is None or host.attempts <= after:
        return None
    return Iteration.objects.filter(run=run, node_id="host", status="running").first()


def steps_done(run) -> int:
    return Iteration.objects.filter(run=run, status="completed").exclude(node_id="host").count()


def test_a_host_turn_killed_three_times_while_it_advances_completes(fault_engine, launch_note):
    worker = fault_engine.start_worker(concurrency=2, LOOP_DEMO_DELAY="0.05", LOOP_MAX_ATTEMPTS=3)
    run = services.start_run(launch_note, actor=ENGINE, message="resume, do not restart")
    for kill in range(3):
        done = steps_done(run)
        # Killed once the turn has made progress since the last kill, mid-way.
        wait_for(
            swept(lambda d=done, k=kill: steps_done(run) > d and host_turn_running(run, k)),
            180,
            0.02,
            message=f"progress before kill {kill + 1}",
        )
        worker.kill()
        worker = fault_engine.start_worker(
            concurrency=2, LOOP_DEMO_DELAY="0.05", LOOP_MAX_ATTEMPTS=3
        )
    fault_engine.sweep_until([run], timeout=240)

    assert run.status == "completed", run.error
    assert_recorded_once(run)
    nothing_left_running(run)
    host = run.nodes.get(node_id="host")
    assert host.attempts == 4
    # No tool call ran twice: each loop iteration exists once, each host call is recorded
    # once, and no step call that completed was run again for the same iteration.
    for loop in Loop.objects.filter(run=run):
        numbers = list(loop.iterations.values_list("number", flat=True))
        assert numbers == list(range(1, loop.iteration_count + 1))
        for it in loop.iterations.all():
            assert it.status == LoopIteration.Status.COMPLETED
            finished = [
                s["agent"]
                for s in it.steps
                if Iteration.objects.get(pk=s["iteration"]).status == "completed"
            ]
            assert finished == loop.pipeline, (it.number, it.steps)
    calls = Counter((c.name, c.loop_id, c.iteration) for c in HostCall.objects.filter(run=run))
    assert calls and max(calls.values()) == 1, calls
    turns = Iteration.objects.filter(run=run, node_id="host").order_by("number")
    assert [t.status for t in turns] == ["failed"] * 3 + ["completed"]
    assert all("goes on from what this one did" in t.error for t in turns[:3])


def test_a_host_killed_three_times_with_no_progress_fails_as_before(fault_engine, launch_note):
    worker = fault_engine.start_worker(concurrency=2, LOOP_DEMO_DELAY="0.05", LOOP_MAX_ATTEMPTS=3)
    run = services.start_run(launch_note, actor=ENGINE, message="no progress")
    for kill in range(3):
        # Killed as soon as its turn runs, before any pipeline step finished.
        wait_for(swept(lambda k=kill: host_turn_running(run, k)), 180, 0.01, message="the turn")
        assert steps_done(run) == 0
        worker.kill()
        worker = fault_engine.start_worker(
            concurrency=2, LOOP_DEMO_DELAY="0.05", LOOP_MAX_ATTEMPTS=3
        )
    fault_engine.sweep_until([run], timeout=240)

    assert run.status == "failed"
    host = run.nodes.get(node_id="host")
    assert host.error == "worker lost 3 times (attempt limit 3)"
    assert "worker lost 3 times (attempt limit 3)" in run.error
    assert steps_done(run) == 0
    nothing_left_running(run)
    assert not Loop.objects.filter(run=run, status=Loop.Status.OPEN).exists()
