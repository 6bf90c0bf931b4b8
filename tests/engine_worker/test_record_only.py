"""`run approve --record-only` (the design's record-only approve): the decision is recorded,
the run stays paused, and a later resume executes it (finalize, or the next iteration)."""

from django.core.management import call_command

from runs import services
from runs.actor import ENGINE, Actor
from runs.models import RunEvent
from tests.api.conftest import client_for
from tests.conftest import pending_gate, wait_for, wait_run

from .conftest import calls, node

REFINE = """
nodes:
  - id: refine
    loop:
      prompt: "feedback=[$LOOP_USER_INPUT]\\n@*: draft <promise>DONE</promise>"
      until: DONE
      max_iterations: 3
      interactive: true
      gate_message: Look at it.
"""


def test_a_recorded_accept_finalizes_when_the_run_is_resumed(
    live_worker, make_scripted_recipe, operator
):
    run = services.start_run(make_scripted_recipe(REFINE, interactive=True), actor=ENGINE)
    gate = wait_for(lambda: pending_gate(run), 30, message="a gate")
    user = operator.get_username()
    call_command("run", "approve", str(run.pk), "--record-only", "--user", user)
    gate.refresh_from_db()
    run.refresh_from_db()
    assert gate.status == "accepted" and run.status == "paused"
    assert node(run, "refine").status == "paused" and len(calls(run)) == 1
    assert RunEvent.objects.filter(run=run, kind="decision_recorded").exists()
    call_command("run", "resume", str(run.pk), "--user", user)
    wait_run(run, "completed", "failed")
    assert run.status == "completed" and len(calls(run)) == 1  # no re-run


def test_recorded_feedback_runs_the_next_iteration_on_resume(
    live_worker, make_scripted_recipe, operator
):
    run = services.start_run(make_scripted_recipe(REFINE, interactive=True), actor=ENGINE)
    gate = wait_for(lambda: pending_gate(run), 30, message="a gate")
    api = client_for(operator)
    answer = api.post(
        f"/api/runs/{run.pk}/approve",
        {"gate": gate.pk, "comment": "shorter", "record_only": True},
    )
    assert answer.status_code == 200 and answer.body["status"] == "paused"
    assert len(calls(run)) == 1
    assert api.post(f"/api/runs/{run.pk}/resume").status_code == 200
    second = wait_for(
        lambda: (g := pending_gate(run)) and g.pk != gate.pk and g, 30, message="gate 2"
    )
    assert "feedback=[shorter]" in calls(run)[-1]["prompt"]
    # the node waits again, at a new gate: the recorded decision is not applied twice
    assert services.recorded_decisions(run) == []
    services.approve(second.pk, Actor.operator(operator, "console"))
    wait_run(run, "completed", "failed")
    assert run.status == "completed"
