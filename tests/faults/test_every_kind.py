"""The fault classes that failed in the chaos soak (issue 29), on real workers and the
fault suite's own Redis: a step machine whose wake-up is lost while the broker is down, a
Python run whose database sessions are terminated in its calls, a Python run with gates
whose worker is killed after two decisions. Each run ends as it would have without the
fault, nobody ticks it, and nothing is left `running`."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest
from django.db import connection

from recipes.editing import create_recipe
from recipes.models import Recipe
from runs import services
from runs.actor import ENGINE, Actor
from runs.models import Iteration, NodeRun, ProviderConfig
from tests.conftest import pending_gate, wait_for
from tests.faults.conftest import FaultEngine, RedisServer, assert_recorded_once
from tests.faults.test_infrastructure import drop_connections
from tests.python.test_gates import GATED

AGENT = Path(__file__).parents[1] / "stepmachine" / "role_agent.py"
DONE = ("completed", "failed", "cancelled", "approved")

STEPS = """
schema: planeai.loop.recipe.v1
id: fault-steps
name: Make, check, ask
roles:
  maker: {provider: scripted, mode: write, isolation: project}
  checker: {provider: scripted, mode: review, isolation: readonly}
steps:
  - id: make
    kind: session.create
    role: maker
    prompt: |
      @handoff *: completed: made it
  - {id: wait_make, kind: handoff.wait, from: maker, on: {completed: check}}
  - id: check
    kind: session.create
    role: checker
    prompt: |
      @handoff *: completed: looks right
  - {id: wait_check, kind: handoff.wait, from: checker, on: {completed: ask}}
  - {id: ask, kind: human.wait, prompt: "Ship it?"}
  - {id: done, kind: loop.status, status: approved}
"""


def nothing_left_running(run) -> None:
    """Once a turn still finishing after its handoff has ended (its session ends with it),
    nothing of the ended run is left running."""
    from tests.stepmachine.conftest import _where_it_stands

    def idle():
        return not (
            NodeRun.objects.filter(run=run, status="running").exists()
            or Iteration.objects.filter(run=run, status__in=["pending", "running"]).exists()
        )

    try:
        wait_for(idle, 60, message=f"nothing of run {run.pk} left running")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_where_it_stands(run)}") from None


def settle(engine, runs, approver, timeout=180) -> None:
    """Sweep (as beat would) and decide gates as a person would, until every run ended."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        for run in runs:
            run.refresh_from_db()
            gate = pending_gate(run)
            if gate is not None:
                approver(run, gate)
        if all(run.status_word in DONE for run in runs):
            return
        assert time.monotonic() < deadline, [(r.pk, r.status) for r in runs]
        from runs.executor.sweep import sweep

        sweep()
        time.sleep(0.3)


@pytest.fixture
def step_recipe(make_recipe):
    ProviderConfig.objects.create(
        name="scripted", kind="command", command=f"{sys.executable} {AGENT}"
    )
    return make_recipe(STEPS, slug="fault-steps")


def approve(run, gate, comment: str = "") -> None:
    services.approve(gate.pk, Actor("cli"), comment=comment)


@pytest.mark.worker  # a FaultEngine of its own starts the workers
def test_runs_whose_wake_ups_are_lost_with_the_broker_go_on(
    transactional_db, worker_env, monkeypatch, settings, tmp_path, step_recipe, bundled, slow_python
):
    """Every kind: a run created while Redis is down starts; a decision taken then (a step
    machine's human.wait, a Python loop's gate) is acted on."""
    settings.LOOP_STALE_PENDING_SECONDS = 1
    server = RedisServer(tmp_path).start()
    engine = FaultEngine(server.url, worker_env, tmp_path, monkeypatch)
    try:
        worker = engine.start_worker()
        paused = services.start_run(step_recipe, actor=ENGINE, message="first")
        gated = services.start_run(
            slow_python("slow-gated", gate=True), actor=ENGINE, message="gated"
        )
        wait_for(lambda: pending_gate(paused), 120, message="the machine at its human.wait")
        wait_for(lambda: pending_gate(gated), 120, message="the Python loop at its gate")
        server.stop(signal.SIGKILL)
        wait_for(
            lambda: "Connection to broker lost" in worker.log_path.read_text(errors="replace"),
            60,
            message="the worker to notice that Redis is gone",
        )
        # Committed while the broker is down: every message that follows is lost.
        created = services.start_run(step_recipe, actor=ENGINE, message="created in the outage")
        workflow = services.start_run(
            bundled["counter-loop"], actor=ENGINE, message="created in the outage"
        )
        driven = services.start_run(
            bundled["launch-note"], actor=ENGINE, message="created in the outage"
        )
        approve(paused, pending_gate(paused))
        approve(gated, pending_gate(gated), comment="once more")
        server.start()
        settle(engine, [paused, created, workflow, driven, gated], approve)
        assert worker.proc.poll() is None, "the worker exited instead of reconnecting"
        for run in (paused, created):
            assert run.status_word == "approved", (run.pk, run.status_word, run.error)
            assert not run.events.filter(kind="tick_requested").exists()  # nobody ticked it
            nothing_left_running(run)
        for run in (workflow, driven, gated):
            assert run.status == "completed", (run.pk, run.recipe.slug, run.error)
            nothing_left_running(run)
        assert gated.gates.filter(status="iterated").count() == 1  # the outage's decision
    finally:
        engine.close()
        server.stop()


@pytest.fixture
def slow_python(tmp_path):
    def make(slug: str, *, gate: bool):
        ProviderConfig.objects.get_or_create(
            name="slow-demo", kind="demo", defaults={"options": {"delay": 0.1}}
        )
        source = GATED.replace("PROVIDER", "slow-demo")
        if not gate:
            source = source.replace("gate=True,\n", "")
        path = tmp_path / f"{slug.replace('-', '_')}.py"
        path.write_text(source)
        recipe, _ = create_recipe(
            source, slug=slug, origin=Recipe.Origin.PROJECT, source_path=str(path)
        )
        return recipe

    return make


def calls_done(run) -> int:
    return Iteration.objects.filter(run=run, status="completed").count()


def test_python_runs_survive_database_sessions_terminated_in_their_calls(fault_engine, slow_python):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: server sessions to terminate")
    recipe = slow_python("slow-loop", gate=False)
    fault_engine.start_worker(concurrency=3)
    runs = [services.start_run(recipe, actor=ENGINE, message=f"python {n}") for n in range(3)]
    dropped = 0
    for target in (1, 4, 8, 12):
        wait_for(lambda t=target: sum(map(calls_done, runs)) >= t, 120, message="progress")
        wait_for(
            lambda: (
                Iteration.objects.filter(run__in=runs, status="running").exists()
                or all(run.status_word in DONE for run in runs)
            ),
            60,
            interval=0.02,
            message="a call in progress",
        )
        dropped += drop_connections()
    assert dropped > 0
    fault_engine.sweep_until(runs, timeout=180)
    for run in runs:
        assert run.status == "completed", (run.pk, run.error)
        assert_recorded_once(run)
        nothing_left_running(run)
    assert fault_engine.workers[0].proc.poll() is None


def test_a_python_run_killed_after_two_gates_is_taken_back_not_failed(
    fault_engine, slow_python, settings
):
    settings.LOOP_MAX_ATTEMPTS = 3
    recipe = slow_python("slow-gated", gate=True)
    worker = fault_engine.start_worker(concurrency=1)
    run = services.start_run(recipe, actor=ENGINE, message="gated")
    for number in (1, 2):
        gate = wait_for(lambda: pending_gate(run), 120, message=f"gate {number}")
        approve(run, gate, comment="keep going")

    def writing_three():
        it = Iteration.objects.filter(run=run, node_id="writer", number=3).first()
        return it and it.status == "running" and it.raw_output

    wait_for(writing_three, 120, interval=0.02, message="writer call 3 streaming")
    worker.kill()
    fault_engine.start_worker(concurrency=1)
    settle(fault_engine, [run], approve)
    assert run.status == "completed", run.error
    workflow = run.nodes.get(node_id="workflow")
    assert workflow.workers_lost == 2  # the killed execution and the one that took over
    writer = Iteration.objects.get(run=run, node_id="writer", number=3)
    assert writer.attempts == 2 and writer.status == "completed"
    nothing_left_running(run)


# A maker that hands off, then keeps working on its first turn until `go` exists: a kill
# then lands after the handoff was recorded, as in the soak's run 117.
TALKER = r"""#!/usr/bin/env bash
go=$1
cat >/dev/null
$LOOP_HANDOFF_CMD --status completed --summary "turn $LOOP_ITERATION"
echo "handed off turn $LOOP_ITERATION"
while [ "$LOOP_ITERATION" = 1 ] && [ ! -e "$go" ]; do sleep 0.05; done
echo "done talking"
"""

MAKER = """
schema: planeai.loop.recipe.v1
id: fault-rerun
name: Make, polish, ask
roles:
  maker: {provider: talker, mode: write, isolation: project}
steps:
  - {id: make, kind: session.create, role: maker, prompt: Make it.}
  - {id: wait_make, kind: handoff.wait, from: maker, on: {completed: polish}}
  - {id: polish, kind: session.prompt, role: maker, select: latest, prompt: Polish it.}
  - {id: wait_polish, kind: handoff.wait, from: maker, on: {completed: ask}}
  - {id: ask, kind: human.wait, prompt: "Ship it?"}
  - {id: done, kind: loop.status, status: approved}
"""


def test_a_step_machine_turn_killed_after_its_handoff_is_not_taken_twice(
    fault_engine, make_recipe, tmp_path
):
    from loops.stepmachine.models import Handoff

    script, go = tmp_path / "talker.sh", tmp_path / "go"
    script.write_text(TALKER)
    ProviderConfig.objects.create(name="talker", kind="command", command=f"bash {script} {go}")
    worker = fault_engine.start_worker(concurrency=2)  # one for the turn, one for ticks
    run = services.start_run(make_recipe(MAKER, slug="fault-rerun"), actor=ENGINE, message="rerun")
    from tests.stepmachine.conftest import _where_it_stands

    try:
        wait_for(
            lambda: run.events.filter(kind="handoff_consumed", step="wait_make").exists(),
            120,
            message="maker turn 1's handoff taken while the turn still runs",
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_where_it_stands(run)}") from None
    worker.kill()
    go.touch()
    fault_engine.start_worker(concurrency=2)
    settle(fault_engine, [run], approve)
    assert run.status_word == "approved", run.error
    first = Iteration.objects.get(run=run, node_id="maker", number=1)
    second = Iteration.objects.get(run=run, node_id="maker", number=2)
    assert first.attempts == 2  # the killed turn ran again and handed off again
    taken = Handoff.objects.get(run=run, consumed_by_step="wait_polish")
    assert taken.iteration_id == second.pk  # not turn 1's second report
    gate = run.gates.get()
    assert gate.created_at >= taken.recorded_at
    nothing_left_running(run)
