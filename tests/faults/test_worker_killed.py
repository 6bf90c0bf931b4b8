"""A worker killed with SIGKILL in the middle of an iteration.

The run still ends (the iteration re-runs, or fails at the attempt limit), no iteration is
recorded twice, two attempts of one iteration never run at the same time, and the killed
worker's agent (with its own children) dies with it.
"""

import signal
import time
from pathlib import Path

import pytest

from runs import services
from runs.actor import ENGINE
from runs.models import Iteration
from tests.conftest import wait_for
from tests.faults.conftest import (
    agent_recipe,
    assert_never_concurrent,
    assert_no_orphans,
    assert_recorded_once,
    read_markers,
)

SLOW = {"pre": 14, "mid": 16, "post": 14}


def wait_marker(markers: Path, kind: str, iteration: int, count: int = 1) -> list[dict]:
    def seen():
        found = [
            m for m in read_markers(markers) if (m["kind"], m["iteration"]) == (kind, iteration)
        ]
        return found if len(found) >= count else None

    return wait_for(
        seen, 30, interval=0.02, message=f"agent marker {kind} of iteration {iteration}"
    )


def streamed(run, number: int) -> bool:
    it = Iteration.objects.filter(run=run, number=number).first()
    return bool(it and "step" in it.raw_output)


def kill_at(point: str, engine, worker, run, markers: Path, attempt: int = 1) -> int:
    """Wait until attempt `attempt` of iteration 2 reaches `point`, then kill. Returns the
    killed agent's process group."""
    start = wait_marker(markers, "start", 2, attempt)[-1]
    if point == "stream":
        wait_for(lambda: streamed(run, 2), 30, interval=0.02, message="streamed output")
    elif point == "said":
        wait_marker(markers, "said", 2, attempt)
    if point == "pool-child":
        pool_pid = int(Path(f"/proc/{start['pgid']}/stat").read_text().rsplit(")", 1)[1].split()[1])
        import os

        os.kill(pool_pid, signal.SIGKILL)
    else:
        worker.kill()
    return start["pgid"]


@pytest.mark.parametrize("point", ["start", "stream", "said", "pool-child"])
def test_killed_iteration_reruns_once_and_alone(
    point, fault_engine, make_recipe, agent_script, tmp_path
):
    markers = tmp_path / "markers.log"
    recipe = make_recipe(agent_recipe(agent_script, markers, slow_iteration=2, **SLOW))
    worker = fault_engine.start_worker()
    run = services.start_run(recipe, actor=ENGINE, message="survive a kill")
    killed_group = kill_at(point, fault_engine, worker, run, markers)
    assert_no_orphans([killed_group])
    if point != "pool-child":
        fault_engine.start_worker()
    fault_engine.sweep_until([run])

    assert run.status == "completed", run.error
    assert_recorded_once(run)
    rows = {it.number: it for it in Iteration.objects.filter(run=run)}
    assert sorted(rows) == [1, 2, 3]
    assert all(it.status == "completed" for it in rows.values())
    assert rows[2].attempts == 2 and rows[1].attempts == 1 and rows[3].attempts == 1
    assert "COMPLETE" in rows[3].raw_output and "step" in rows[2].raw_output
    started = [
        e.data["attempt"]
        for e in run.events.filter(kind="iteration_started")
        if e.data["iteration"] == 2
    ]
    assert started == [1, 2]
    assert run.events.filter(kind="iteration_requeued").count() == 1
    marks = read_markers(markers)
    assert_never_concurrent(marks)
    assert len({m["pgid"] for m in marks if m["iteration"] == 2}) == 2
    assert_no_orphans({m["pgid"] for m in marks})


def test_iteration_fails_at_the_attempt_limit(
    fault_engine, make_recipe, agent_script, tmp_path, settings
):
    settings.LOOP_MAX_ATTEMPTS = 2
    markers = tmp_path / "markers.log"
    recipe = make_recipe(agent_recipe(agent_script, markers, slow_iteration=2, **SLOW))
    worker = fault_engine.start_worker(LOOP_MAX_ATTEMPTS=2)
    run = services.start_run(recipe, actor=ENGINE, message="killed twice")
    groups = [kill_at("start", fault_engine, worker, run, markers)]
    worker = fault_engine.start_worker(LOOP_MAX_ATTEMPTS=2)
    deadline = time.monotonic() + 30
    while (
        len([m for m in read_markers(markers) if (m["kind"], m["iteration"]) == ("start", 2)]) < 2
    ):
        assert time.monotonic() < deadline, "the iteration was not re-run"
        from runs.executor.sweep import sweep

        sweep()
        time.sleep(0.2)
    groups.append(kill_at("start", fault_engine, worker, run, markers, attempt=2))
    fault_engine.start_worker(LOOP_MAX_ATTEMPTS=2)
    fault_engine.sweep_until([run])

    assert run.status == "failed"
    second = Iteration.objects.get(run=run, number=2)
    assert second.status == "failed" and second.attempts == 2
    assert "attempt limit 2" in second.error and "attempt limit 2" in run.error
    assert not Iteration.objects.filter(run=run, number=3).exists()
    assert_recorded_once(run)
    marks = read_markers(markers)
    assert_never_concurrent(marks)
    assert_no_orphans(groups)
