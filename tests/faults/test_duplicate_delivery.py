"""A task delivered twice does nothing the second time; a task never delivered is sent
again by the sweep. The engine runs in this process, on a broker we control: every message
is delivered twice (one after the other, or both at once), or its first copy is lost."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connection

from loops.workflow.tasks import finish_group_iteration
from runs import dispatch, services, tasks
from runs.actor import ENGINE, Actor
from runs.executor.sweep import sweep
from runs.models import Iteration, Run
from runs.providers.demo import DemoProvider
from tests.conftest import pending_gate
from tests.faults.conftest import assert_recorded_once


class ControlledBroker:
    """Messages wait in a list until `deliver` runs them, `copies` times each."""

    def __init__(self, copies: int = 2, concurrent: bool = False, lose_first: bool = False):
        self.copies = copies
        self.concurrent = concurrent
        self.lose_first = lose_first
        self.messages: list[tuple[str, tuple]] = []
        self.seen: Counter = Counter()
        self.lost: Counter = Counter()

    def send(self, name: str, *args) -> None:
        self.messages.append((name, args))

    def deliver(self) -> None:
        while self.messages:
            name, args = self.messages.pop(0)
            self.seen[name] += 1
            if self.lose_first and self.seen[(name, args)] == 0:
                self.seen[(name, args)] += 1
                self.lost[name] += 1
                continue
            task = dispatch.task(name)
            if self.concurrent:
                self._at_once(task, args)
            else:
                for _ in range(self.copies):
                    task(*args)

    def _at_once(self, task, args) -> None:
        barrier = threading.Barrier(self.copies)
        errors = []

        def copy():
            try:
                barrier.wait()
                task(*args)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
            finally:
                connection.close()

        threads = [threading.Thread(target=copy) for _ in range(self.copies)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors, errors


@pytest.fixture
def agent_calls(monkeypatch):
    calls: Counter = Counter()
    lock = threading.Lock()
    original = DemoProvider.run

    def counted(self, request, on_chunk):
        with lock:
            calls[(request.run_id, request.node_id, request.iteration)] += 1
        return original(self, request, on_chunk)

    monkeypatch.setattr(DemoProvider, "run", counted)
    return calls


def use_broker(monkeypatch, broker: ControlledBroker) -> ControlledBroker:
    from runs import dispatch

    monkeypatch.setattr(dispatch, "deliver", broker.send)
    # Every iteration goes through the broker (no continuation fast path), so each one
    # is delivered twice too.
    monkeypatch.setattr(dispatch, "CHAIN_SECONDS", 0)
    return broker


def drive(run: Run, broker: ControlledBroker, *, sweeps: int = 0) -> Run:
    """Deliver until the run ends; at a gate, decide; when stuck, sweep (if allowed)."""
    for _ in range(200):
        broker.deliver()
        run.refresh_from_db()
        if run.is_terminal:
            return run
        gate = pending_gate(run)
        if gate is not None:
            decision = gate.decisions[0]["id"] if gate.decisions else ""
            services.approve(gate.pk, Actor("cli"), decision=decision)
        elif sweeps:
            sweeps -= 1
            sweep()
        else:
            raise AssertionError(f"run {run.pk} is stuck at {run.status} with nothing queued")
    raise AssertionError("the run did not end")


def assert_done_once(run: Run, agent_calls: Counter) -> None:
    assert run.status == "completed", run.error
    assert_recorded_once(run)
    mine = {key: count for key, count in agent_calls.items() if key[0] == run.pk}
    assert all(count == 1 for count in mine.values()), mine
    once_per_step = ("node_started", "node_completed", "iteration_started", "loop_started")
    for kind in once_per_step:
        keys = Counter((e.step, e.data.get("iteration")) for e in run.events.filter(kind=kind))
        assert all(count == 1 for count in keys.values()), (kind, keys)
    assert all(it.attempts == 1 for it in Iteration.objects.filter(run=run, node_run__kind="loop"))


SLUGS = ["counter-loop", "writer-reviewer", "fix-until-green", "guided-refine", "release-approval"]


@pytest.mark.parametrize("concurrent", [False, True], ids=["one-after-the-other", "at-once"])
def test_every_task_delivered_twice_runs_once(
    concurrent, transactional_db, bundled, monkeypatch, agent_calls, settings
):
    settings.LOOP_DEMO_DELAY = 0
    broker = use_broker(monkeypatch, ControlledBroker(copies=2, concurrent=concurrent))
    for slug in SLUGS:
        run = drive(services.start_run(bundled[slug], actor=ENGINE, message="twice"), broker)
        assert_done_once(run, agent_calls)
    assert {"advance_run", "start_node", "run_iteration", "workflow.finish_group_iteration"} <= set(
        broker.seen
    )


def test_lost_messages_are_sent_again_by_the_sweep(
    transactional_db, bundled, monkeypatch, agent_calls, settings
):
    settings.LOOP_DEMO_DELAY = 0
    settings.LOOP_STALE_PENDING_SECONDS = 0
    broker = use_broker(monkeypatch, ControlledBroker(copies=1, lose_first=True))
    for slug in SLUGS:
        run = drive(
            services.start_run(bundled[slug], actor=ENGINE, message="lossy"), broker, sweeps=100
        )
        assert_done_once(run, agent_calls)
    assert {"advance_run", "start_node", "run_iteration", "workflow.finish_group_iteration"} <= set(
        broker.lost
    )


def test_redelivery_after_the_run_ended_changes_nothing(
    transactional_db, bundled, monkeypatch, agent_calls, settings
):
    settings.LOOP_DEMO_DELAY = 0
    broker = use_broker(monkeypatch, ControlledBroker(copies=1))
    run = drive(
        services.start_run(bundled["writer-reviewer"], actor=ENGINE, message="late"), broker
    )
    events = run.events.count()
    for node in run.nodes.all():
        tasks.start_node(node.pk)
        if node.kind == "loop_group":
            for number in range(1, node.iteration_count + 1):
                finish_group_iteration(node.pk, number)
    for it in Iteration.objects.filter(run=run):
        tasks.run_iteration(it.pk)
    tasks.advance_run(run.pk)
    broker.deliver()
    run.refresh_from_db()
    assert run.events.count() == events
    assert_done_once(run, agent_calls)
