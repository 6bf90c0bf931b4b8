"""A step machine whose wake-up the broker lost is woken by the sweep by itself: a run
created while Redis was down starts, a handoff or a decision recorded then is acted on.
Messages are kept in a list (`sent`); "the broker is down" is a `deliver` that raises, as
kombu does. The tasks are run here, in order, as a worker would."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from loops.stepmachine import handoffs
from loops.stepmachine import services as step_machine
from runs import services
from runs.actor import Actor
from runs.executor.sweep import sweep
from runs.models import NodeRun, RunEvent
from tests.stepmachine.conftest import WAITING, machine

pytestmark = pytest.mark.django_db(transaction=True)

GATED = """
schema: planeai.loop.recipe.v1
id: gated
name: Ask, then finish
roles:
  maker: {mode: write, isolation: project, provider: demo}
steps:
  - {id: ask, kind: human.wait, prompt: "Go on?"}
  - {id: done, kind: loop.status, status: approved}
"""


def age(run) -> None:
    """Everything the run logged happened a while ago (longer than the stale window)."""
    RunEvent.objects.filter(run=run).update(created_at=timezone.now() - timedelta(hours=1))


def test_a_run_created_while_the_broker_is_down_is_started_by_the_sweep(
    offline_broker, plane_recipe, operator
):
    recipe = plane_recipe(WAITING)
    offline_broker.down = True
    person = Actor.operator(operator, "console")
    run = services.start_run(recipe, person)  # committed; its advance_run is lost
    waiting = services.start_run(recipe, person, start=False)
    offline_broker.down = False
    assert sweep()["advanced"] == 0  # not yet: the message may still be on its way
    age(run)
    age(waiting)
    assert sweep()["advanced"] == 1
    assert offline_broker.sent == [("advance_run", (run.pk,))]  # not the run created to wait
    offline_broker.run_all()
    assert machine(run).current == "wait" and "handoff from maker" in machine(run).waiting
    age(run)
    assert sweep()["advanced"] == 0  # waiting for the maker is not a lost wake-up


def test_a_handoff_recorded_while_the_broker_is_down_is_acted_on(
    offline_broker, plane_recipe, operator
):
    run = services.start_run(plane_recipe(WAITING), actor=Actor.operator(operator, "console"))
    offline_broker.run_all()
    offline_broker.down = True
    handoffs.record_handoff(
        run.pk, actor=Actor("cli"), role="maker", status="completed", summary="done"
    )
    offline_broker.down = False
    age(run)
    sweep()
    assert offline_broker.sent == [("stepmachine.tick_machine", (run.pk,))]
    offline_broker.run_all()
    run.refresh_from_db()
    assert run.status_word == "approved"
    assert sweep()["advanced"] == 0


def test_a_decision_taken_while_the_broker_is_down_is_acted_on(
    offline_broker, plane_recipe, operator
):
    run = services.start_run(plane_recipe(GATED), actor=Actor.operator(operator, "console"))
    offline_broker.run_all()
    run.refresh_from_db()
    assert run.status == "paused"
    age(run)
    assert sweep()["advanced"] == 0  # a gate waits for a person
    offline_broker.down = True
    services.approve(services.pending_gate(run).pk, Actor("cli"))
    offline_broker.down = False
    age(run)
    sweep()
    assert offline_broker.sent == [("stepmachine.tick_machine", (run.pk,))]
    offline_broker.run_all()
    run.refresh_from_db()
    assert run.status_word == "approved"


def test_a_tick_asked_for_while_the_broker_is_down_starts_the_run(
    offline_broker, plane_recipe, operator
):
    run = services.start_run(
        plane_recipe(WAITING), actor=Actor.operator(operator, "console"), start=False
    )
    offline_broker.down = True
    step_machine.tick(run, Actor("cli"))
    offline_broker.down = False
    age(run)
    sweep()
    assert offline_broker.sent == [("advance_run", (run.pk,))]
    offline_broker.run_all()
    assert NodeRun.objects.get(run=run, node_id="steps").status == "running"
