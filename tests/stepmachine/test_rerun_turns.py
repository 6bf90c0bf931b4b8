"""A step-machine turn re-run after its worker was lost: its second handoff is not taken as
the role's next turn's report (the soak's "Ship it?" gate opened while maker turn 2 was
still running), and a turn that ended records no more. Turns are claimed and ended here
by hand, as a worker would; the machine's own messages run in order."""

from __future__ import annotations

import pytest
from django.db import transaction

from loops.stepmachine.handoffs import record_handoff
from loops.stepmachine.models import Handoff
from runs.actor import Actor
from runs.errors import Conflict
from runs.executor.state import lock_run
from runs.models import Iteration
from tests.stepmachine.conftest import machine

pytestmark = pytest.mark.django_db(transaction=True)

TWO_TURNS = """
schema: planeai.loop.recipe.v1
id: two-turns
name: Make, then polish
roles:
  maker: {mode: write, isolation: project, provider: demo}
steps:
  - {id: make, kind: session.create, role: maker, prompt: Make it.}
  - {id: wait_make, kind: handoff.wait, from: maker, on: {completed: polish}}
  - {id: polish, kind: session.prompt, role: maker, select: latest, prompt: Polish it.}
  - {id: wait_polish, kind: handoff.wait, from: maker, on: {completed: done}}
  - {id: done, kind: loop.status, status: approved}
"""


def turn(run, number: int) -> Iteration:
    return Iteration.objects.get(run=run, node_id="maker", number=number)


def claim(it: Iteration) -> Iteration:
    assert Iteration.objects.claim(it, it.prompt, None)
    return it


def hand_off(run, it: Iteration, summary: str):
    return record_handoff(
        run.pk,
        role="maker",
        status="completed",
        summary=summary,
        actor=Actor("agent"),
        iteration_id=it.pk,
    )


def end_turn(run, it: Iteration) -> None:
    from loops.stepmachine.turns import _after_turn
    from runs.models import NodeRun

    with transaction.atomic():
        locked = lock_run(run.pk)
        it.refresh_from_db()
        assert it.finish(Iteration.Status.COMPLETED, output="done")
        _after_turn(locked, NodeRun.objects.get(pk=it.node_run_id))


def test_a_re_run_turns_second_handoff_is_not_the_next_turns(
    offline_broker, plane_recipe, operator
):
    from runs import services

    run = services.start_run(plane_recipe(TWO_TURNS), actor=Actor.operator(operator, "console"))
    offline_broker.run_all(skip={"run_iteration"})
    first = claim(turn(run, 1))
    hand_off(run, first, "made it (attempt 1)")
    offline_broker.run_all(skip={"run_iteration"})
    assert machine(run).current == "polish"  # wait_make took it; the session is still busy
    # The worker is lost after the handoff; the sweep hands the turn to attempt 2.
    Iteration.objects.filter(pk=first.pk).update(attempts=2)
    again = hand_off(run, first, "made it (attempt 2)")
    run.refresh_from_db()
    recorded = run.events.get(kind="handoff_recorded", seq=again.seq)
    assert (recorded.data["turn"], recorded.data["attempt"]) == (1, 2)
    end_turn(run, first)
    offline_broker.run_all(skip={"run_iteration"})
    state = machine(run)
    assert state.current == "wait_polish" and "handoff from maker" in state.waiting
    assert Handoff.objects.get(pk=again.pk).consumed_at is None
    with pytest.raises(Conflict, match="turn has ended"):
        hand_off(run, first, "too late")
    second = claim(turn(run, 2))
    last = hand_off(run, second, "polished")
    offline_broker.run_all(skip={"run_iteration"})
    run.refresh_from_db()
    assert run.status_word == "approved"
    assert Handoff.objects.get(pk=last.pk).consumed_by_step == "wait_polish"


def test_a_re_run_turns_handoff_replaces_the_one_not_taken_yet(
    offline_broker, plane_recipe, operator
):
    from runs import services

    run = services.start_run(plane_recipe(TWO_TURNS), actor=Actor.operator(operator, "console"))
    offline_broker.run_all(skip={"run_iteration"})
    first = claim(turn(run, 1))
    offline_broker.down = True  # the first attempt's handoff is recorded, its tick lost
    hand_off(run, first, "made it (attempt 1)")
    offline_broker.down = False
    Iteration.objects.filter(pk=first.pk).update(attempts=2)
    replacing = hand_off(run, first, "made it (attempt 2)")
    offline_broker.run_all(skip={"run_iteration"})
    assert Handoff.objects.get(pk=replacing.pk).consumed_by_step == "wait_make"
    assert machine(run).last_error == "made it (attempt 2)"


def test_an_agents_handoff_survives_a_dropped_database_session(
    offline_broker, plane_recipe, operator
):
    """The soak's two stalled machines: the database session was terminated as the agent
    recorded its handoff, the tool answered an error, the turn ended without a report."""
    from django.db import connection

    from loops.stepmachine.handoffs import RECORD_HANDOFF
    from runs import services
    from runs.agent_tools import ToolContext
    from tests.python.test_dropped_connections import terminate_this_threads_session

    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: a server session to terminate")
    run = services.start_run(plane_recipe(TWO_TURNS), actor=Actor.operator(operator, "console"))
    offline_broker.run_all(skip={"run_iteration"})
    first = claim(turn(run, 1))
    context = ToolContext(run_id=run.pk, node_id="maker", iteration_id=first.pk, role="maker")
    terminate_this_threads_session()
    answer = RECORD_HANDOFF.handler(context, {"status": "completed", "summary": "made it"})
    assert answer["status"] == "completed"
    assert Handoff.objects.get(pk=answer["recorded"]).iteration_id == first.pk
