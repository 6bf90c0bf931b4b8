"""Gate deadlines (`gate_timeout` / `on_timeout`) on the run kernel, driven in this process:
the sweep reminds once, rejects, or fails the run, as "the sweep" everywhere; two sweepers
act once; a decision made in time leaves nothing to do. Workflow loop gates, approval
nodes and a Python loop's gate all go through `NodeRun.pause`."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.db import connection

from notifications.models import Delivery, Subscription
from recipes.editing import create_recipe
from recipes.models import Recipe
from runs import services
from runs.actor import ENGINE, Actor
from runs.event_text import describe
from runs.executor.sweep import sweep
from runs.models import Gate, NodeRun, Run

APPROVAL = """
name: deadline-approval
nodes:
  - id: ship
    approval:
      message: Ship it?
      gate_timeout: 30m
      on_timeout: {action}
  - id: announce
    depends_on: [ship]
    bash: echo shipped
"""

LOOP = """
name: deadline-loop
interactive: true
provider: demo
nodes:
  - id: refine
    loop:
      prompt: Improve the draft.
      until: NEVER_SAID
      max_iterations: 3
      interactive: true
      gate_message: Read it.
      gate_timeout: 1h30m
      on_timeout: reject
"""

PYTHON = '''"""Python loop with a deadline"""
from loops.python import Agent, GateOptions, LoopWorkflow

workflow = LoopWorkflow(
    [Agent("writer", "Write.", provider="demo")],
    max_iterations=3,
    gate=GateOptions(timeout="2h", on_timeout="reject"),
)
'''


@pytest.fixture(autouse=True)
def committed(transactional_db):
    """Messages leave on commit: these tests commit, like a worker does."""


def started(make_recipe, broker, source, slug):
    run = services.start_run(make_recipe(source, slug), actor=ENGINE, message="go")
    broker.deliver()
    run.refresh_from_db()
    assert run.status == Run.Status.PAUSED, run.error
    return run, services.pending_gate(run)


@pytest.fixture
def webhook(db, settings):
    settings.LOOP_WEBHOOK_HOSTS = ["127.0.0.1"]
    return Subscription.objects.create(
        name="team hook", url="http://127.0.0.1:9/hook", on_run_failed=False
    )


def test_the_deadline_is_stored_on_the_gate_and_shown_by_the_api(make_recipe, broker):
    run, gate = started(make_recipe, broker, APPROVAL.format(action="remind"), "approve-later")
    assert gate.timeout_seconds == 1800 and gate.on_timeout == "remind"
    assert gate.deadline_at - gate.created_at == pytest.approx(
        timedelta(minutes=30), abs=timedelta(seconds=2)
    )
    as_seen = gate.as_dict()
    assert as_seen["deadline_at"] == gate.deadline_at.isoformat()
    assert as_seen["on_timeout"] == "remind"


def test_remind_sends_one_reminder_and_the_gate_keeps_waiting(make_recipe, broker, webhook):
    run, gate = started(make_recipe, broker, APPROVAL.format(action="remind"), "remind-me")
    assert Delivery.objects.filter(event="gate_waiting").count() == 1
    assert sweep(now=gate.deadline_at - timedelta(seconds=1))["reminded"] == 0
    later = gate.deadline_at + timedelta(seconds=1)
    assert sweep(now=later)["reminded"] == 1
    assert sweep(now=later + timedelta(hours=5))["reminded"] == 0  # once per deadline
    gate.refresh_from_db()
    assert gate.is_pending and gate.reminded_at == later
    run.refresh_from_db()
    assert run.status == Run.Status.PAUSED
    reminder = Delivery.objects.get(event="gate_reminder")
    assert reminder.gate == gate and reminder.subscription == webhook
    assert reminder.payload["gate"]["url"].endswith(f"/runs/{run.pk}/gates/{gate.pk}/")
    assert "has waited 30 minutes" in reminder.payload["summary"]
    event = run.events.get(kind="gate_reminded")
    assert event.data["by"] == "the sweep" and event.data["surface"] == "sweep"
    assert describe(event) == (
        "the sweep sent a reminder: the gate at ship has waited 30 minutes (gate_timeout)."
    )


def test_reject_fails_the_step_as_the_sweep(make_recipe, broker):
    run, gate = started(make_recipe, broker, APPROVAL.format(action="reject"), "reject-late")
    assert sweep(now=gate.deadline_at + timedelta(seconds=1))["timed_out"] == 1
    broker.deliver()
    gate.refresh_from_db()
    assert gate.status == Gate.Status.REJECTED
    assert (gate.decider, gate.surface) == ("the sweep", "sweep")
    assert gate.comment == "no decision within 30 minutes (gate_timeout)"
    ship = NodeRun.objects.get(run=run, node_id="ship")
    assert ship.status == NodeRun.Status.FAILED
    assert ship.error == (
        "rejected at the gate by the sweep: no decision within 30 minutes (gate_timeout)"
    )
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert NodeRun.objects.get(run=run, node_id="announce").status != NodeRun.Status.COMPLETED


def test_fail_fails_the_run_and_closes_the_gate(make_recipe, broker):
    run, gate = started(make_recipe, broker, APPROVAL.format(action="fail"), "fail-late")
    assert sweep(now=gate.deadline_at + timedelta(minutes=1))["timed_out"] == 1
    gate.refresh_from_db()
    assert gate.status == Gate.Status.TIMED_OUT and gate.decider == "the sweep"
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.error == (
        "the gate at 'ship' had no decision within 30 minutes (gate_timeout); on_timeout: fail"
    )
    decided = run.events.filter(kind="gate_decided").last()
    assert describe(decided).startswith("the sweep closed the gate at ship")
    assert sweep(now=gate.deadline_at + timedelta(hours=1))["timed_out"] == 0


def test_a_decision_in_time_leaves_the_sweep_nothing_to_do(make_recipe, broker, operator):
    run, gate = started(make_recipe, broker, APPROVAL.format(action="fail"), "decided-in-time")
    services.approve(gate.pk, Actor.operator(operator, "console"))
    counts = sweep(now=gate.deadline_at + timedelta(days=1))
    assert counts["timed_out"] == counts["reminded"] == 0
    gate.refresh_from_db()
    assert gate.status == Gate.Status.ACCEPTED and gate.decider == "otto"


def test_a_loop_gate_with_a_deadline_is_rejected_by_the_sweep(make_recipe, broker):
    run, gate = started(make_recipe, broker, LOOP, "loop-deadline")
    assert (gate.kind, gate.iteration_number, gate.timeout_seconds) == ("loop", 1, 5400)
    sweep(now=gate.deadline_at + timedelta(seconds=1))
    broker.deliver()
    row = NodeRun.objects.get(run=run, node_id="refine")
    assert row.status == NodeRun.Status.FAILED
    assert "by the sweep: no decision within 1 hour 30 minutes" in row.error


def in_a_thread(work):
    """The Python runner calls `asyncio.run`, as in a worker; after the browser tests this
    process has an event loop running (Playwright's), which a worker never has."""

    def closing():
        try:
            work()
        finally:
            connection.close()

    with ThreadPoolExecutor(1) as pool:
        pool.submit(closing).result()


def test_a_python_loops_gate_option_gives_its_gate_a_deadline(transactional_db, broker, tmp_path):
    path = tmp_path / "python_deadline.py"
    path.write_text(PYTHON)
    recipe, _ = create_recipe(
        PYTHON, slug="python-deadline", origin=Recipe.Origin.PROJECT, source_path=str(path)
    )
    run = services.start_run(recipe, actor=ENGINE, message="copy")
    in_a_thread(broker.deliver)
    gate = services.pending_gate(run)
    assert gate is not None and (gate.node_id, gate.on_timeout) == ("writer", "reject")
    assert gate.timeout_seconds == 7200
    assert sweep(now=gate.deadline_at + timedelta(seconds=1))["timed_out"] == 1
    in_a_thread(broker.deliver)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    gate.refresh_from_db()
    assert gate.status == Gate.Status.REJECTED and gate.decider == "the sweep"


def test_two_sweepers_remind_once(transactional_db, make_recipe, broker, webhook):
    run, gate = started(make_recipe, broker, APPROVAL.format(action="remind"), "two-sweepers")
    now = gate.deadline_at + timedelta(seconds=5)
    start = threading.Barrier(2)
    results = []

    def sweeper():
        try:
            start.wait()
            results.append(sweep(now=now)["reminded"])
        finally:
            connection.close()

    threads = [threading.Thread(target=sweeper) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(results) == [0, 1]
    assert run.events.filter(kind="gate_reminded").count() == 1
    assert Delivery.objects.filter(event="gate_reminder").count() == 1
