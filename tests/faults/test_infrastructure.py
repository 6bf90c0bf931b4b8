"""Redis stopped and restarted, database connections dropped: runs resume on their own.

While Redis is down the queued messages are lost (it keeps nothing on disk), agents keep
running, and finishing iterations cannot send their next task; the sweep re-sends pending
work whose message was lost, and workers reconnect to both services by themselves.
"""

import signal

import pytest
from django.db import connection

from runs import services
from runs.actor import ENGINE
from runs.models import Iteration
from tests.conftest import wait_for, wait_run
from tests.faults.conftest import (
    FaultEngine,
    RedisServer,
    agent_recipe,
    assert_never_concurrent,
    assert_recorded_once,
    read_markers,
)

ITERATIONS = 8


def start_mixed_runs(make_recipe, bundled, agent_script, markers) -> list:
    recipe = make_recipe(
        agent_recipe(agent_script, markers, complete_after=ITERATIONS, max_iterations=ITERATIONS)
    )
    runs = [services.start_run(recipe, actor=ENGINE, message=f"agent run {n}") for n in range(4)]
    runs += [
        services.start_run(bundled[slug], actor=ENGINE, message="bundled")
        for slug in ("counter-loop", "writer-reviewer", "fix-until-green")
    ]
    return runs


def completed_iterations(runs) -> int:
    return Iteration.objects.filter(run__in=runs, status="completed").count()


def assert_all_completed_once(runs, markers) -> None:
    for run in runs:
        assert run.status == "completed", (run.pk, run.recipe.slug, run.error)
        assert_recorded_once(run)
    agent_runs = [run for run in runs if run.recipe.slug == "test-recipe"]
    for run in agent_runs:
        numbers = sorted(Iteration.objects.filter(run=run).values_list("number", flat=True))
        assert numbers == list(range(1, ITERATIONS + 1))
    assert_never_concurrent(read_markers(markers))


@pytest.mark.worker  # a FaultEngine of its own starts the workers
def test_runs_resume_after_redis_restarts(
    transactional_db,
    worker_env,
    monkeypatch,
    settings,
    tmp_path,
    make_recipe,
    bundled,
    agent_script,
):
    settings.LOOP_STALE_PENDING_SECONDS = 1
    server = RedisServer(tmp_path).start()
    engine = FaultEngine(server.url, worker_env, tmp_path, monkeypatch)
    try:
        engine.start_worker(concurrency=4, LOOP_DEMO_DELAY="0.01")
        markers = tmp_path / "markers.log"
        runs = start_mixed_runs(make_recipe, bundled, agent_script, markers)
        wait_for(lambda: completed_iterations(runs) >= 6, 60, message="some progress")
        server.stop(signal.SIGKILL)
        before = completed_iterations(runs)
        # Restart only once the worker has noticed the broker is gone (not after a guess
        # at how long that takes on a busy machine).
        log = engine.workers[0].log_path
        wait_for(
            lambda: "Connection to broker lost" in log.read_text(errors="replace"),
            message="the worker to notice that Redis is gone",
        )
        server.start()
        engine.sweep_until(runs, timeout=120)
        assert engine.workers[0].proc.poll() is None, "the worker exited instead of reconnecting"
        assert before < completed_iterations(runs)
        assert_all_completed_once(runs, markers)
    finally:
        engine.close()
        server.stop()


@pytest.mark.worker  # a FaultEngine of its own starts the worker
def test_a_worker_sweeps_when_its_broker_returns(
    transactional_db, worker_env, monkeypatch, settings, tmp_path, bundled
):
    """No beat and nobody sweeping here: a run started while Redis was down lost its first
    message, and the worker's own sweep once its broker connection came back sends it
    again (issue 42: recovery does not wait for beat's next tick)."""
    server = RedisServer(tmp_path).start()
    engine = FaultEngine(server.url, worker_env, tmp_path, monkeypatch)
    try:
        worker = engine.start_worker(concurrency=1, LOOP_STALE_PENDING_SECONDS="1")
        server.stop(signal.SIGKILL)
        wait_for(
            lambda: "Connection to broker lost" in worker.log_path.read_text(errors="replace"),
            message="the worker to notice that Redis is gone",
        )
        run = services.start_run(bundled["counter-loop"], actor=ENGINE, message="in the outage")
        # Its message was not sent: older than LOOP_STALE_PENDING_SECONDS, the sweep's to send.
        wait_for(lambda: Iteration.objects.filter(run=run).count() == 0 and _older(run, 1.5))
        server.start()
        wait_run(run, "completed", timeout=90)
    finally:
        engine.close()
        server.stop()


def _older(run, seconds: float) -> bool:
    from django.utils import timezone

    run.refresh_from_db()
    return (timezone.now() - run.created_at).total_seconds() > seconds


def drop_connections() -> int:
    """Terminate every other session on the test database (the workers' connections)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def test_runs_resume_after_database_connections_drop(
    fault_engine, make_recipe, bundled, agent_script, tmp_path
):
    if connection.vendor != "postgresql":
        pytest.skip(
            "needs PostgreSQL: SQLite has no server connections to drop (CI runs on PostgreSQL)"
        )
    fault_engine.start_worker(concurrency=4, LOOP_DEMO_DELAY="0.01")
    markers = tmp_path / "markers.log"
    runs = start_mixed_runs(make_recipe, bundled, agent_script, markers)
    dropped = 0
    for target in (3, 8, 14):
        wait_for(lambda t=target: completed_iterations(runs) >= t, 60, message="progress")
        dropped += drop_connections()
    assert dropped > 0
    fault_engine.sweep_until(runs, timeout=120)
    assert fault_engine.workers[0].proc.poll() is None
    assert_all_completed_once(runs, markers)
