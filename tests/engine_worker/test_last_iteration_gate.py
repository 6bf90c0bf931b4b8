"""Feedback at the gate of a loop's last iteration, which met its completion condition: there
is no further iteration to run, so it is refused with the reason and the gate stays open."""

import pytest

from runs import services
from runs.actor import ENGINE, Actor
from runs.errors import Conflict
from tests.api.conftest import client_for
from tests.conftest import pending_gate, wait_for, wait_run

from .conftest import node

LAST = """
nodes:
  - id: refine
    loop:
      prompt: "@1: draft one\\n@2: draft two <promise>DONE</promise>"
      until: DONE
      max_iterations: 2
      interactive: true
      gate_message: Look at it.
"""


def test_feedback_on_a_completed_last_iteration_is_refused_and_the_gate_stays(
    live_worker, make_scripted_recipe, operator
):
    run = services.start_run(make_scripted_recipe(LAST, interactive=True), actor=ENGINE)
    actor = Actor.operator(operator, "console")
    first = wait_for(lambda: pending_gate(run), 30, message="gate 1")
    services.approve(first.pk, actor)  # nothing completed: iterate
    last = wait_for(
        lambda: (g := pending_gate(run)) and g.pk != first.pk and g, 30, message="gate 2"
    )
    assert last.completion_signaled
    with pytest.raises(Conflict, match="last .max_iterations: 2. and it met its completion"):
        services.approve(last.pk, actor, comment="one more pass")
    answer = client_for(operator).post(
        f"/api/runs/{run.pk}/approve", {"gate": last.pk, "comment": "again"}
    )
    assert answer.status_code == 409 and "cannot run another iteration" in answer.content.decode()
    last.refresh_from_db()
    assert last.status == "pending"
    services.approve(last.pk, actor)  # accepting still works
    wait_run(run, "completed", "failed")
    assert run.status == "completed" and node(run, "refine").output == "draft two"
