"""The fault matrix's cells for the four kinds (docs/operations.md,
"Faults: what recovers by itself", says which test covers which cell).

Each test starts one run of its kind on demo agents slowed down per word, waits until one
of its units (an agent call: a driven run's pipeline step, a machine's turn, a Python call)
is in flight or has just ended, and then strikes: the whole worker SIGKILLed, its pool
processes SIGKILLed (the worker's main process lives and forks new ones), or every database
session of the workers terminated. The run must end as it would have without the fault, by
itself (the sweep runs as beat would; a person approves the machine's gate), with each unit
recorded once, only the struck unit run twice (a driven run starts a new host turn
instead), and nothing left `running`.
"""

from __future__ import annotations

import os
import signal

import pytest
from django.db import connection

from runs import services
from runs.actor import ENGINE
from runs.models import Iteration, ProviderConfig
from tests.conftest import pending_gate, wait_for
from tests.faults.conftest import assert_recorded_once
from tests.faults.test_every_kind import approve, nothing_left_running, settle
from tests.faults.test_infrastructure import drop_connections

STEPS = """
schema: planeai.loop.recipe.v1
id: matrix-steps
name: Make, check, ask
roles:
  maker: {provider: slow-demo, mode: write, isolation: project}
  checker: {provider: slow-demo, mode: review, isolation: readonly}
steps:
  - {id: make, kind: session.create, role: maker, prompt: Make the change.}
  - {id: wait_make, kind: handoff.wait, from: maker, on: {completed: check}}
  - {id: check, kind: session.create, role: checker, prompt: Check the change.}
  - {id: wait_check, kind: handoff.wait, from: checker, on: {completed: ask}}
  - {id: ask, kind: human.wait, prompt: "Ship it?"}
  - {id: done, kind: loop.status, status: approved}
"""

ENDS = {
    "workflow": "completed",
    "driven": "completed",
    "step machine": "approved",
    "python": "completed",
}

# Whole-worker SIGKILL of a Python call and database sessions terminated in Python calls are
# test_python_worker_killed.py and test_every_kind.py; the workflow kind's kills are
# test_worker_killed.py (with marker agents that see overlapping processes).
CELLS = [
    ("workflow", "database-mid-unit"),
    ("workflow", "database-between-units"),
    ("driven", "worker"),
    ("driven", "pool-child"),
    # Sometimes (1 in 4 here) a pipeline call whose sessions were terminated ends `failed`
    # instead of retrying on a new connection; the run still completes. Not fixed yet.
    ("driven", "database-mid-unit"),
    ("driven", "database-between-units"),
    ("step machine", "worker"),
    ("step machine", "pool-child"),
    ("step machine", "database-mid-unit"),
    ("step machine", "database-between-units"),
    ("python", "pool-child"),
    ("python", "database-between-units"),
]


@pytest.fixture
def start_kind(make_recipe, bundled, tmp_path):
    ProviderConfig.objects.get_or_create(
        name="slow-demo", kind="demo", defaults={"options": {"delay": 0.05}}
    )

    def start(kind: str):
        if kind == "workflow":
            recipe = bundled["counter-loop"]
        elif kind == "driven":
            recipe = bundled["launch-note"]
        elif kind == "step machine":
            recipe = make_recipe(STEPS, slug="matrix-steps")
        else:
            from recipes.editing import create_recipe
            from recipes.models import Recipe
            from tests.python.test_gates import GATED

            source = GATED.replace("PROVIDER", "slow-demo").replace("gate=True,\n", "")
            path = tmp_path / "matrix_python.py"
            path.write_text(source)
            recipe, _ = create_recipe(
                source, slug="matrix-python", origin=Recipe.Origin.PROJECT, source_path=str(path)
            )
        return services.start_run(recipe, actor=ENGINE, message=f"{kind} under a fault")

    return start


def unit_in_flight(run):
    """An agent call of the run that a worker has claimed and not ended."""
    # The latest: a driven run's host turn stays running while its pipeline's calls run.
    return Iteration.objects.filter(run=run, status="running").order_by("-pk").first()


def over(run) -> bool:
    """The run ended, or reached its gate (a step machine's human.wait), with no unit left."""
    run.refresh_from_db()
    return run.status_word in ENDS.values() or pending_gate(run) is not None


def swept(predicate):
    """`predicate`, with a sweep pass before each look (beat's job, made often)."""
    from runs.executor.sweep import sweep

    def check():
        sweep()
        return predicate()

    return check


def units_done(run) -> int:
    return Iteration.objects.filter(run=run, status="completed").count()


def kill_pool(worker) -> None:
    """SIGKILL every pool process; the worker's main process forks new ones."""
    for pid in worker.pool_pids():
        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("kind,fault", CELLS)
def test_a_run_ends_as_it_would_have_despite_the_fault(kind, fault, fault_engine, start_kind):
    if fault.startswith("database") and connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: server sessions to terminate")
    # A database fault loses no worker: a lease long enough that a stall of the loaded
    # machine is not taken for a lost worker (the default is 30 s; the kill cells keep 2 s
    # so that the sweep takes their work back quickly).
    lease = {"LOOP_LEASE_SECONDS": "10"} if fault.startswith("database") else {}
    worker = fault_engine.start_worker(concurrency=2, LOOP_DEMO_DELAY="0.05", **lease)
    run = start_kind(kind)
    struck, hit = None, []
    if fault in ("worker", "pool-child", "database-mid-unit"):
        rounds = 1 if fault in ("worker", "pool-child") else 3
        for _ in range(rounds):
            wait_for(lambda: unit_in_flight(run) or over(run), 180, 0.01, message="a call")
            struck = unit_in_flight(run)
            hit.append(struck)
            if fault == "worker":
                worker.kill()
                fault_engine.start_worker(concurrency=2, LOOP_DEMO_DELAY="0.05")
            elif fault == "pool-child":
                kill_pool(worker)
            else:
                drop_connections()
                # The next round strikes another unit, not the same one again.
                wait_for(
                    swept(lambda s=struck: over(run) or unit_in_flight(run) not in (None, s)),
                    180,
                    0.1,
                    message="another call, or the run's end",
                )
    else:
        for target in (1, 2):
            wait_for(lambda t=target: units_done(run) >= t, 180, 0.01, message="a unit's end")
            drop_connections()
    assert not hit or hit[0] is not None, "the fault landed on no call in flight"
    settle(fault_engine, [run], approve, timeout=240)

    assert run.status_word == ENDS[kind], (run.pk, run.status_word, run.error)
    assert not run.events.filter(kind="tick_requested").exists()  # nobody ticked it
    assert_recorded_once(run)
    nothing_left_running(run)
    rows = list(Iteration.objects.filter(run=run))
    if kind == "driven" and fault in ("worker", "pool-child"):
        # A driven run's next execution goes on from the lost host turn: it fails that turn
        # and the struck call (run again, as a new iteration) and answers the host's repeated
        # tool calls from the record (loops/driven/runner.py).
        assert struck is not None
        struck.refresh_from_db()
        assert struck.status == "failed" and "worker running the host was lost" in struck.error
        lost = [it for it in rows if it.status != "completed"]
        assert all(it.status == "failed" and "was lost" in it.error for it in lost), lost
        assert {it.attempts for it in rows} == {1}
    elif kind == "driven":
        # A dropped session can keep the host's worker from renewing its turn's lease for
        # longer than the lease on a busy machine: the sweep then takes the turn over as a
        # lost worker's (above), and the call in flight is recorded as the lost attempt.
        lost = [it for it in rows if it.status != "completed"]
        assert all(it.status == "failed" and "was lost" in it.error for it in lost), lost
    elif fault in ("worker", "pool-child"):
        assert all(it.status == "completed" for it in rows), [(it.pk, it.status) for it in rows]
        assert struck is not None
        struck.refresh_from_db()
        assert struck.attempts == 2, "the struck call was not run again, or ran more than twice"
        assert {it.attempts for it in rows if it.pk != struck.pk} <= {1}
    else:
        assert all(it.status == "completed" for it in rows), [
            (it.pk, it.status, it.error) for it in rows if it.status != "completed"
        ]
        # A dropped connection costs a step one retry on a new connection, not an attempt.
        assert {it.attempts for it in rows} == {1}, [(it.pk, it.attempts) for it in rows]
    assert fault_engine.workers[-1].proc.poll() is None, "the worker exited"
