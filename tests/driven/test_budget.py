"""A driven run's budget: checked before each host turn and each loop iteration, never in
the middle of a pipeline step; past a limit the run stops as budget_exceeded (saying which
limit), the host is told to end its turn, and raising the budget resumes the run with a new
turn of its host."""

from __future__ import annotations

from loops.driven.models import Loop
from runs import services
from runs.actor import ENGINE, Actor
from runs.models import Iteration
from tests.conftest import wait_for, wait_run
from tests.driven.conftest import driven_recipe


def test_a_driven_loop_stops_between_iterations_then_raise_and_resume(
    live_worker, make_recipe, operator
):
    recipe = make_recipe(driven_recipe("demo"), slug="driven-budget")
    run = services.start_run(recipe, actor=ENGINE, message="Widget 2.0", budget={"iterations": 3})
    wait_run(run, "budget_exceeded", "completed", "failed")
    assert run.status == "budget_exceeded", run.error
    assert "iterations: 3 of 3" in run.error
    # The host's turn, told it cannot iterate, ends on its own.
    wait_for(
        lambda: not Iteration.objects.filter(run=run, status="running").exists(),
        60,
        message="the host's turn to end",
    )
    # The host's turn and one full pipeline (researcher → drafter) ran; the iteration the
    # host asked for next never started, and nothing was cut short.
    steps = Iteration.objects.filter(run=run).order_by("id")
    assert [(s.node_id, s.status) for s in steps] == [
        ("host", "completed"),
        ("researcher", "completed"),
        ("drafter", "completed"),
    ]
    (loop,) = Loop.objects.filter(run=run)
    assert loop.iteration_count == 1 and loop.status != Loop.Status.OPEN
    assert "budget" in steps[0].output  # the host was told why it could not iterate
    host = run.nodes.get(node_id="host")
    assert host.status == "paused"

    services.set_budget(run, Actor.operator(operator, "api"), {"iterations": 20}, resume=True)
    wait_run(run, "completed", "failed", "budget_exceeded")
    assert run.status == "completed", run.error
    turns = Iteration.objects.filter(run=run, node_id="host").order_by("number")
    assert [(t.number, t.status) for t in turns] == [(1, "completed"), (2, "completed")]
    second = Loop.objects.filter(run=run).order_by("pk").last()
    assert second.iteration_count == 2 and second.status == Loop.Status.COMPLETED
