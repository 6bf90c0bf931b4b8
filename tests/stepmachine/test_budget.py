"""A step machine's budget: at the limit it stops between turns (budget_exceeded, saying
which limit) instead of crashing, and raising the budget resumes it at the step it stopped."""

from runs import services
from runs.actor import Actor
from runs.models import Iteration
from tests.stepmachine.conftest import calls, events, machine, settled

THREE_TURNS = """
schema: planeai.loop.recipe.v1
id: three-turns
name: Three turns
roles:
  maker: {provider: scripted, mode: write, isolation: project}
steps:
  - {id: first, kind: session.create, role: maker, prompt: "@handoff 1: completed: one"}
  - {id: wait_first, kind: handoff.wait, from: maker, on: {completed: second}}
  - {id: second, kind: session.prompt, role: maker, select: latest, prompt: "@handoff 2: completed: two"}
  - {id: wait_second, kind: handoff.wait, from: maker, on: {completed: third}}
  - {id: third, kind: session.prompt, role: maker, select: latest, prompt: "@handoff 3: completed: three"}
  - {id: wait_third, kind: handoff.wait, from: maker, on: {completed: done}}
  - {id: done, kind: loop.status, status: completed_unreviewed}
"""


def test_a_step_machine_stops_at_its_budget_then_raise_and_resume(
    live_worker, scripted, plane_recipe, operator
):
    run = services.start_run(
        plane_recipe(THREE_TURNS),
        actor=Actor.operator(operator, "console"),
        budget={"iterations": 2},
    )
    settled(run, "budget_exceeded")
    assert "iterations: 2 of 2" in run.error
    # Two turns ran to their end; the third was never sent, and the machine waits at it.
    turns = Iteration.objects.filter(run=run, node_id="maker").order_by("number")
    assert [t.status for t in turns] == ["completed", "completed"]
    assert [c["turn"] for c in calls(run)] == [1, 2]
    assert machine(run).current == "third"
    assert events(run, "run_budget_exceeded")[0].data["limit"] == "iterations"

    services.set_budget(run, Actor.operator(operator, "api"), {"iterations": 5}, resume=True)
    settled(run, "completed_unreviewed")
    assert [c["turn"] for c in calls(run)] == [1, 2, 3]
    assert [c["resume"] for c in calls(run)] == [False, True, True]  # the same session
    assert [e.data["status"] for e in events(run, "handoff_consumed")] == ["completed"] * 3
