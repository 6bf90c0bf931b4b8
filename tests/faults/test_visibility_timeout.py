"""A gate left open longer than the broker's visibility timeout does not cause a re-run.

The worker's broker redelivers unacknowledged messages after one second here. The first
iteration runs for about three seconds (its message is redelivered while it runs), then a
gate stays open for several more: nothing runs again, the gate stays pending, the log is
unchanged; approving then goes on normally.
"""

from runs import services
from runs.actor import ENGINE, Actor
from runs.models import Gate, Iteration
from tests.conftest import wait_for, wait_run
from tests.faults.conftest import agent_recipe, assert_recorded_once, read_markers

VISIBILITY_TIMEOUT = 1


def test_open_gate_outlasting_the_visibility_timeout_runs_nothing_again(
    fault_engine, make_recipe, agent_script, tmp_path
):
    markers = tmp_path / "markers.log"
    source = agent_recipe(
        agent_script,
        markers,
        slow_iteration=1,
        pre=20,
        mid=20,
        post=20,
        complete_after=2,
        interactive=True,
    )
    recipe = make_recipe(source)
    worker = fault_engine.start_worker(
        concurrency=2, LOOP_VISIBILITY_TIMEOUT=VISIBILITY_TIMEOUT, LOOP_LOG_TASKS="1"
    )
    run = services.start_run(recipe, actor=ENGINE, message="wait at the gate")
    wait_run(run, "paused", "failed", timeout=60)
    assert run.status == "paused", run.error
    events = list(run.events.values_list("seq", "kind"))

    def redelivered():
        """The broker redelivered the running iteration's message (the worker logs each
        receipt; the duplicate finds the iteration taken and does nothing)."""
        lines = worker.log_path.read_text().splitlines()
        return (
            sum("runs.tasks.run_iteration[" in line and "received" in line for line in lines) >= 2
        )

    wait_for(redelivered, message="a redelivery of the running iteration's task")
    run.refresh_from_db()
    assert run.status == "paused"
    assert list(run.events.values_list("seq", "kind")) == events
    gate = Gate.objects.get(run=run)
    assert gate.status == Gate.Status.PENDING
    assert list(Iteration.objects.filter(run=run).values_list("number", "attempts")) == [(1, 1)]
    starts = [m for m in read_markers(markers) if m["kind"] == "start"]
    assert len(starts) == 1

    services.approve(gate.pk, Actor("api"), comment="one more pass")
    wait_run(run, "paused", "completed", "failed", timeout=60)
    gate = Gate.objects.filter(run=run, status=Gate.Status.PENDING).get()
    services.approve(gate.pk, Actor("api"))
    wait_run(run, "completed", "failed", timeout=60)
    assert run.status == "completed", run.error
    assert_recorded_once(run)
    assert [m["iteration"] for m in read_markers(markers) if m["kind"] == "start"] == [1, 2]
