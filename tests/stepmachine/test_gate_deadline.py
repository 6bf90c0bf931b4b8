"""A step machine's `human.wait` takes a gate deadline like any gate: `gate_timeout` with
`on_timeout: remind | reject | fail` (never approve), checked with its line, and acted on
by the sweep."""

from datetime import timedelta

from recipes.validation import validate_source
from runs import services
from runs.actor import Actor
from runs.executor.sweep import sweep
from runs.models import Gate
from tests.conftest import wait_for
from tests.stepmachine.conftest import settled

SHIP = """
schema: planeai.loop.recipe.v1
id: ship-by
name: Ship by a deadline
steps:
  - id: ship
    kind: human.wait
    prompt: Ship it?
    gate_timeout: 30m
    on_timeout: ACTION
  - {id: done, kind: loop.status, status: approved}
"""


def test_human_wait_refuses_an_approving_timeout_on_its_line(db):
    result = validate_source(SHIP.replace("ACTION", "approve"), "ship.yaml")
    (problem,) = result.errors
    assert problem.line == 10 and "never decides for a person" in problem.message
    assert validate_source(SHIP.replace("ACTION", "remind"), "ship.yaml").ok


def test_human_wait_past_its_deadline_is_rejected_by_the_sweep(live_worker, plane_recipe, operator):
    run = services.start_run(
        plane_recipe(SHIP.replace("ACTION", "reject")), actor=Actor.operator(operator, "console")
    )
    settled(run, "paused")
    gate = Gate.objects.get(run=run, status="pending")
    assert gate.node_id == "ship" and gate.on_timeout == "reject"
    assert gate.timeout_seconds == 1800 and gate.deadline_at is not None
    assert sweep(now=gate.deadline_at - timedelta(seconds=1))["timed_out"] == 0
    assert sweep(now=gate.deadline_at + timedelta(seconds=1))["timed_out"] == 1
    wait_for(lambda: run.refresh_from_db() or run.status == "failed", 30, message="failed")
    assert (
        run.error == "rejected at ship by the sweep: no decision within 30 minutes (gate_timeout)"
    )
