"""Round trips per iteration of a plain loop: at most six (BEGIN and COMMIT counted), the
same at iteration 1 as at iteration 300, and the iteration's record the same as before."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs import dispatch, services, tasks
from runs.actor import ENGINE
from runs.models import Iteration, NodeRun

STEPS = 300
LOOP = f"""
name: instant-loop
providers:
  instant: {{kind: demo, delay: 0, complete_after: {STEPS}}}
nodes:
  - id: work
    provider: instant
    loop:
      prompt: "Take the next step. When all steps are done, output: COMPLETE"
      until: COMPLETE
      max_iterations: {STEPS}
"""


@pytest.fixture
def one_at_a_time(monkeypatch):
    monkeypatch.setattr(dispatch, "CHAIN_SECONDS", 0)


def test_a_plain_iteration_costs_at_most_six_queries_whatever_the_history(
    transactional_db, make_recipe, broker, one_at_a_time
):
    run = services.start_run(make_recipe(LOOP, "instant-loop"), actor=ENGINE, message="count")
    tasks.advance_run(run.pk)
    tasks.start_node(next(args[0] for name, args in broker.sent if name == "start_node"))
    counts = {}
    for number in range(1, STEPS + 1):
        it = Iteration.objects.get(run=run, status="pending")
        assert it.number == number
        with CaptureQueriesContext(connection) as captured:
            tasks.run_iteration(it.pk)
        counts[number] = len(captured.captured_queries)
    plain = [counts[n] for n in (1, 2, 3, 100, STEPS - 1)]
    print("queries per iteration", {n: counts[n] for n in (1, 2, 3, 100, STEPS - 1)})
    # SQLite (the embedded default) takes the transactional path: separate statements in
    # one transaction (runs/models/batched.py is PostgreSQL's). Pinned too, so it stays put.
    limit = 6 if connection.vendor == "postgresql" else 18
    assert max(plain) <= limit, counts
    assert counts[2] == counts[STEPS - 1], "the cost grows with the run's history"
    # Each iteration was run above; what is left to deliver is the run's advance.
    broker.sent = [sent for sent in broker.sent if sent[0] == "advance_run"]
    broker.deliver()
    run.refresh_from_db()
    assert run.status == "completed"
    # The record is the same as the transactional path writes: gapless events, one
    # started / completed / queued per iteration, each iteration finished once.
    seqs = list(run.events.values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    kinds = list(run.events.values_list("kind", flat=True))
    assert kinds.count("iteration_started") == STEPS
    assert kinds.count("iteration_completed") == STEPS
    assert kinds.count("iteration_queued") == STEPS
    its = Iteration.objects.filter(run=run).order_by("number")
    assert [i.status for i in its] == ["completed"] * STEPS
    assert all(i.attempts == 1 and i.duration_ms is not None for i in its)
    assert its[1].prompt and "COMPLETE" in its[STEPS - 1].raw_output
    node = NodeRun.objects.get(run=run, node_id="work")
    assert node.status == "completed" and node.iteration_count == STEPS


def test_a_cancel_before_the_finish_keeps_the_iteration_cancelled(
    transactional_db, make_recipe, broker, one_at_a_time, operator
):
    """The one-statement finish is fenced like `finish`: a run cancelled while the agent
    ran gets no completed iteration and no next one."""
    from runs.actor import Actor
    from runs.providers.demo import DemoProvider

    run = services.start_run(make_recipe(LOOP, "instant-loop"), actor=ENGINE, message="cancel")
    tasks.advance_run(run.pk)
    tasks.start_node(next(args[0] for name, args in broker.sent if name == "start_node"))
    it = Iteration.objects.get(run=run, status="pending")
    original = DemoProvider.run

    def cancel_then_answer(self, request, on_chunk):
        services.cancel_run(run, Actor.operator(operator, "console"))
        return original(self, request, on_chunk)

    try:
        DemoProvider.run = cancel_then_answer
        tasks.run_iteration(it.pk)
    finally:
        DemoProvider.run = original
    it.refresh_from_db()
    assert it.status == "cancelled"
    assert Iteration.objects.filter(run=run).count() == 1
    assert not run.events.filter(kind="iteration_completed").exists()
