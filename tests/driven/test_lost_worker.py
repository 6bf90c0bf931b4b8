"""A host turn whose worker was lost goes on from its last durable point (issue 42): the
next execution takes over the lost turn's loop and record of tool calls, re-runs only the
loop iteration that was in flight (keeping the steps it finished), and answers the calls
the host makes again from the record. The sweep's attempt limit counts lost progress, not
lost workers (NodeRun.progressed_since_claim). Rows are written as a lost worker leaves
them; the resumed turn runs in this process, on demo agents."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from loops.driven import runner
from loops.driven.driver import ITERATE, START, LoopDriver
from loops.driven.models import HostCall, Loop
from loops.driven.pipeline import run_step
from runs import dispatch
from runs.executor.context import build_context
from runs.executor.spec import spec_for
from runs.executor.stream import NodeLease
from runs.executor.sweep import sweep
from runs.models import Iteration, NodeRun
from runs.providers.demo_tools import FEEDBACK
from tests.driven.conftest import driven_run  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)
PIPELINE = ["researcher", "drafter"]


@pytest.fixture(autouse=True)
def sent(monkeypatch, settings):
    settings.LOOP_DEMO_DELAY = 0
    messages: list = []
    monkeypatch.setattr(dispatch, "deliver", lambda name, *args: messages.append((name, args)))
    return messages


def claimed(host: NodeRun) -> NodeRun:
    NodeRun.objects.filter(pk=host.pk).update(
        status="running", attempts=1, started_at=timezone.now()
    )
    host.refresh_from_db()
    return host


def lost_driver(run, host, turn) -> LoopDriver:
    """The driver of the turn a worker is about to lose."""
    spec = spec_for(run)
    lease = NodeLease(host.pk, host.attempts)
    ctx = build_context(run, spec, host)
    return LoopDriver(run=run, spec=spec, row=host, host_iteration=turn, lease=lease, ctx=ctx)


def steps_of(run) -> list[tuple[str, str]]:
    return [
        (it.node_id, it.status)
        for it in Iteration.objects.filter(run=run).exclude(node_id="host").order_by("pk")
    ]


def test_a_resumed_turn_answers_the_calls_made_again_from_the_record(driven_run):  # noqa: F811
    run, host, turn = driven_run
    host = claimed(host)
    driver = lost_driver(run, host, turn)
    assert driver.toolbox.call(START, {"pipeline": PIPELINE}).ok
    assert driver.toolbox.call(ITERATE, {"feedback": FEEDBACK[0]}).ok
    # The worker is lost here: turn 1 stays running, its loop open after two iterations.
    assert steps_of(run) == [("researcher", "completed"), ("drafter", "completed")] * 2

    runner.execute(run, host)

    (loop,) = Loop.objects.filter(run=run)
    assert loop.status == Loop.Status.COMPLETED
    assert [it.number for it in loop.iterations.all()] == [1, 2]
    assert steps_of(run) == [("researcher", "completed"), ("drafter", "completed")] * 2
    turns = list(Iteration.objects.filter(run=run, node_id="host").order_by("number"))
    assert [(t.number, t.status) for t in turns] == [(1, "failed"), (2, "completed")]
    assert "turn 2 goes on" in turns[0].error
    assert "An earlier attempt of this turn was interrupted" in turns[1].prompt
    assert loop.host_iteration_id == turns[1].pk
    calls = HostCall.objects.filter(run=run).order_by("seq")
    assert [c.name for c in calls] == [START, ITERATE, "core_finish_loop"]
    host.refresh_from_db()
    assert host.status == "completed"


def test_the_iteration_in_flight_runs_again_keeping_its_finished_steps(driven_run):  # noqa: F811
    run, host, turn = driven_run
    host = claimed(host)
    driver = lost_driver(run, host, turn)
    assert driver.toolbox.call(START, {"pipeline": PIPELINE}).ok
    loop = Loop.objects.get(run=run)
    # core_iterate_loop began iteration 2; its researcher finished, then the worker was lost
    # in the drafter's call.
    driver.calling = (ITERATE, {"feedback": FEEDBACK[0]})
    it = driver._begin_iteration(loop, {"previousOutput": loop.last_output}, FEEDBACK[0])
    run_step(driver, it, "researcher", it.input)
    drafter = NodeRun.objects.get(run=run, node_id="drafter")
    lost_call = Iteration.objects.create(
        run=run, node_run=drafter, node_id="drafter", number=2, status="running"
    )
    it.add_step("drafter", lost_call.pk)

    runner.execute(run, host)

    loop.refresh_from_db()
    assert loop.status == Loop.Status.COMPLETED
    assert [(i.number, i.status) for i in loop.iterations.all()] == [
        (1, "completed"),
        (2, "completed"),
    ]
    # Only the lost drafter call ran again; the finished researcher call did not.
    assert steps_of(run) == [
        ("researcher", "completed"),
        ("drafter", "completed"),
        ("researcher", "completed"),
        ("drafter", "failed"),
        ("drafter", "completed"),
    ]
    lost_call.refresh_from_db()
    assert "worker running the host was lost" in lost_call.error
    calls = HostCall.objects.filter(run=run).order_by("seq")
    assert [(c.name, c.iteration) for c in calls] == [
        (START, 1),
        (ITERATE, 2),
        ("core_finish_loop", None),
    ]


def test_a_different_call_ends_the_replay(driven_run):  # noqa: F811
    run, host, turn = driven_run
    driver = lost_driver(run, claimed(host), turn)
    driver.record = [HostCall(name=START, arguments={"pipeline": PIPELINE})]
    assert driver._replayed(ITERATE, {}) is None
    assert driver._replayed(START, {"pipeline": PIPELINE}) is None  # the record is left


# --- the attempt limit: lost progress, not lost workers -------------------------------------


def expired(host: NodeRun, attempts: int) -> NodeRun:
    claim = timezone.now() - timedelta(minutes=5)
    NodeRun.objects.filter(pk=host.pk).update(
        status="running",
        attempts=attempts,
        started_at=claim,
        lease_expires_at=timezone.now() - timedelta(minutes=1),
    )
    host.refresh_from_db()
    return host


def finished_step(run, when) -> None:
    row = NodeRun.objects.get_or_create(
        run=run, node_id="drafter", defaults={"kind": "pipeline_step", "status": "running"}
    )[0]
    Iteration.objects.create(
        run=run,
        node_run=row,
        node_id="drafter",
        number=row.iterations.count() + 1,
        status="completed",
        finished_at=when,
    )


def test_a_unit_lost_at_the_limit_after_progress_goes_on_with_a_fresh_count(
    driven_run,  # noqa: F811
    settings,
    sent,
):
    host, swept = lost_after_progress(driven_run, settings, 3)
    assert swept["requeued"] == 1
    assert host.status == "pending" and host.workers_lost == 0
    assert ("start_node", (host.pk,)) in sent
    NodeRun.objects.claim(host.pk)
    host.refresh_from_db()
    assert (host.attempts, host.workers_lost) == (4, 1)


def test_a_unit_lost_at_the_limit_with_no_progress_fails_as_before(
    driven_run,  # noqa: F811
    settings,
):
    settings.LOOP_MAX_ATTEMPTS = 3
    run, host, _ = driven_run
    host = expired(host, 3)
    finished_step(run, timezone.now() - timedelta(minutes=9))  # before its claim
    assert not host.progressed_since_claim(["pipeline_step"])
    assert sweep()["failed"] == 1
    host.refresh_from_db()
    assert host.status == "failed"
    assert host.error == "worker lost 3 times (attempt limit 3)"


def test_a_slow_worker_whose_turn_was_taken_over_changes_nothing(driven_run):  # noqa: F811
    """The sweep took the node back from a worker that was slow, not dead: once the next
    execution has taken its turn over, the old driver's calls are refused (the turn is no
    longer running) and an iteration ended twice ends once, with one crumb."""
    from runs.providers.base import Cancelled

    run, host, turn = driven_run
    host = claimed(host)
    slow = lost_driver(run, host, turn)
    assert slow.toolbox.call(START, {"pipeline": PIPELINE}).ok
    (loop,) = Loop.objects.filter(run=run)
    it = loop.iterations.get()

    runner.execute(run, host)  # the next execution takes the turn over and finishes
    with pytest.raises(Cancelled, match="took this host turn over"), transaction.atomic():
        slow._locked_run()
    ends = run.events.filter(kind="loop:iteration:end").count()
    loop.end_iteration(run, it, output="late", shown="late", status="completed")
    assert run.events.filter(kind="loop:iteration:end").count() == ends
    it.refresh_from_db()
    assert it.output != "late"


def test_progress_spares_a_unit_a_bounded_number_of_times(driven_run, settings):  # noqa: F811
    """A unit lost over and over, each time after some progress, is spared up to ten times
    the attempt limit in all (sweep.PROGRESS_SPARES_LIMIT): then it fails, saying how often."""
    host, swept = lost_after_progress(driven_run, settings, 30)
    assert swept["failed"] == 1
    assert host.status == "failed" and host.error == "worker lost 30 times (attempt limit 3)"


def lost_after_progress(started, settings, times: int):
    """The host lost `times` times, the last time after a pipeline step finished; swept."""
    settings.LOOP_MAX_ATTEMPTS = 3
    run, host, _ = started
    host = expired(host, times)
    finished_step(run, timezone.now() - timedelta(minutes=2))  # after its claim
    assert host.progressed_since_claim(["pipeline_step"])
    swept = sweep()
    host.refresh_from_db()
    return host, swept
