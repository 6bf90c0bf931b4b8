"""The run's status sets are one definition: every path that asks "is this run finished?"
or "is this child still alive?" reads `Run.TERMINAL` / `Run.UNFINISHED`."""

from __future__ import annotations

import pytest

from runs import services, tasks
from runs.actor import ENGINE, Actor
from runs.models import Iteration, Run

LOOP = """
name: two-step-loop
providers:
  instant: {kind: demo, delay: 0, complete_after: 2}
nodes:
  - id: work
    provider: instant
    loop:
      prompt: "Take the next step. When all steps are done, output: COMPLETE"
      until: COMPLETE
      max_iterations: 2
"""


def test_every_status_is_finished_or_unfinished_never_both():
    assert Run.TERMINAL | Run.UNFINISHED == set(Run.Status)
    assert not Run.TERMINAL & Run.UNFINISHED
    assert Run.ACTIVE <= Run.UNFINISHED


@pytest.mark.parametrize("finished", sorted(Run.TERMINAL))
def test_no_iteration_is_claimed_in_a_finished_run_whatever_its_status(
    transactional_db, make_recipe, broker, finished
):
    """The iteration hot path (one statement on PostgreSQL, a transaction elsewhere) refuses
    to claim in a run of any finished status: it once knew only three of them."""
    run = services.start_run(make_recipe(LOOP, "two-step-loop"), actor=ENGINE, message="go")
    tasks.advance_run(run.pk)
    tasks.start_node(next(args[0] for name, args in broker.sent if name == "start_node"))
    it = Iteration.objects.get(run=run, status="pending")
    Run.objects.filter(pk=run.pk).update(status=finished)
    assert not Iteration.objects.claim_logged(it, "a prompt", None)
    it.refresh_from_db()
    assert it.status == "pending" and not run.events.filter(kind="iteration_started").exists()


def test_a_budget_stopped_child_is_cancelled_with_its_parent(
    transactional_db, make_recipe, broker, operator
):
    """A child stopped at its budget is alive (it resumes once raised): cancelling the run
    that started it must end it too, not leave it resumable."""
    recipe = make_recipe(LOOP, "two-step-loop")
    parent = services.start_run(recipe, actor=ENGINE, message="parent")
    child = services.start_run(recipe, actor=ENGINE, message="child")
    Run.objects.filter(pk=child.pk).update(parent=parent, status=Run.Status.BUDGET_EXCEEDED)
    services.cancel_run(parent, Actor.operator(operator, "console"))
    child.refresh_from_db()
    assert child.status == Run.Status.CANCELLED
    assert f"run {parent.pk}, which started it, stopped" in child.error
