"""Interactive loops and approval nodes: finalize vs iterate, signal_completes, feedback."""

import pytest

from runs import services
from runs.actor import ENGINE, Actor
from runs.models import Gate
from tests.conftest import pending_gate, wait_for, wait_run

from .conftest import calls, iterations, node

REFINE = """
nodes:
  - id: refine
    loop:
      prompt: "feedback=[$LOOP_USER_INPUT] prev=[$LOOP_PREV_OUTPUT]\\n@1: draft one <promise>DONE</promise>\\n@2: draft two\\n@3: draft three <promise>DONE</promise>"
      until: DONE
      max_iterations: 4
      interactive: true
      gate_message: Review the draft.
  - id: after
    depends_on: [refine]
    bash: printf 'got %s' $refine.output
"""


def gate_of(run):
    return wait_for(lambda: pending_gate(run), 30, message="a pending gate")


def test_gate_on_completed_iteration_finalizes_without_rerun(
    live_worker, make_scripted_recipe, operator
):
    run = services.start_run(
        make_scripted_recipe(REFINE, interactive=True), actor=ENGINE, message="m"
    )
    wait_run(run, "paused")
    gate = gate_of(run)
    assert gate.kind == "loop" and gate.completion_signaled
    assert gate.message.startswith("The agent said DONE.")
    assert "draft one" in gate.message and gate.message.rstrip().endswith("Review the draft.")
    services.approve(gate.pk, Actor.operator(operator, "console"))
    wait_run(run, "completed", "failed")
    assert run.status == "completed"
    assert len(calls(run)) == 1  # no re-run
    assert node(run, "after").output == "got draft one"
    gate.refresh_from_db()
    assert gate.status == "accepted" and gate.decided_by == operator and gate.surface == "console"


def test_feedback_iterates_and_is_only_seen_by_the_next_iteration(
    live_worker, make_scripted_recipe, operator
):
    run = services.start_run(
        make_scripted_recipe(REFINE, interactive=True), actor=ENGINE, message="m"
    )
    wait_run(run, "paused")
    services.approve(
        gate_of(run).pk, Actor.operator(operator, "console"), comment="make it shorter"
    )
    wait_for(lambda: Gate.objects.filter(run=run, status="pending").exists(), 30)
    second = pending_gate(run)
    assert not second.completion_signaled
    assert second.message.startswith("The agent did not say it was done in this iteration")
    # Without completion, a bare approve iterates too.
    services.approve(second.pk, Actor.operator(operator, "console"))
    wait_for(
        lambda: Gate.objects.filter(run=run, status="pending").exclude(pk=second.pk).exists(), 30
    )
    services.approve(pending_gate(run).pk, Actor.operator(operator, "console"))
    wait_run(run, "completed", "failed")
    prompts = [c["prompt"] for c in calls(run)]
    assert "feedback=[] prev=[]" in prompts[0]
    # first iteration after a gate: the feedback, and an empty $LOOP_PREV_OUTPUT
    assert "feedback=[make it shorter] prev=[]" in prompts[1]
    assert "feedback=[] prev=[]" in prompts[2]
    its = iterations(run, "refine")
    assert its[1].feedback == "make it shorter" and its[1].after_gate
    assert [g.status for g in run.gates.order_by("id")] == ["iterated", "iterated", "accepted"]


def test_signal_completes_skips_the_gate_when_a_channel_fired(live_worker, make_scripted_recipe):
    run = services.start_run(
        make_scripted_recipe(
            """
nodes:
  - id: validate
    loop:
      prompt: "@1: VALIDATED"
      until: VALIDATED
      max_iterations: 3
      interactive: true
      gate_message: Validation failed.
      signal_completes: true
""",
            interactive=True,
        ),
        actor=ENGINE,
    )
    wait_run(run, "completed", "failed", "paused")
    assert run.status == "completed" and not run.gates.exists()


def test_reject_fails_the_node_and_the_run(live_worker, make_scripted_recipe, operator):
    run = services.start_run(make_scripted_recipe(REFINE, interactive=True), actor=ENGINE)
    wait_run(run, "paused")
    services.reject(gate_of(run).pk, Actor.operator(operator, "console"), reason="off topic")
    wait_run(run, "failed", "completed")
    assert run.status == "failed"
    assert "rejected at the gate by otto: off topic" in node(run, "refine").error
    assert node(run, "after").status == "skipped"


def test_deciding_twice_changes_nothing_and_says_so(
    live_worker, make_scripted_recipe, operator, admin_user
):
    run = services.start_run(make_scripted_recipe(REFINE, interactive=True), actor=ENGINE)
    wait_run(run, "paused")
    gate = gate_of(run)
    services.approve(gate.pk, Actor.operator(operator, "console"))
    with pytest.raises(services.AlreadyDecided, match="already decided by otto"):
        services.approve(gate.pk, Actor.operator(admin_user, "console"), comment="again")
    wait_run(run, "completed", "failed")
    assert len(calls(run)) == 1


def test_viewer_cannot_decide(live_worker, make_scripted_recipe, viewer):
    run = services.start_run(make_scripted_recipe(REFINE, interactive=True), actor=ENGINE)
    wait_run(run, "paused")
    with pytest.raises(services.NotAllowed):
        services.approve(gate_of(run).pk, Actor.operator(viewer, "console"))


def test_approval_node_decisions_drive_when_branches(live_worker, bundled, operator):
    run = services.start_run(bundled["release-approval"], actor=ENGINE, message="r")
    wait_run(run, "paused")
    gate = gate_of(run)
    assert gate.kind == "approval" and [d["id"] for d in gate.decisions] == ["ship", "hold"]
    assert "3 changes ready" in gate.message  # variables substituted into the message
    with pytest.raises(services.ServiceError):
        services.approve(gate.pk, Actor.operator(operator, "console"), decision="maybe")
    services.approve(gate.pk, Actor.operator(operator, "console"), decision="hold")
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    assert node(run, "decide").output == "hold"
    assert node(run, "ship").status == "skipped" and node(run, "hold").output == "held for later"
    assert node(run, "summary").status == "completed"


def test_capture_response_makes_the_comment_the_output(live_worker, make_scripted_recipe, operator):
    run = services.start_run(
        make_scripted_recipe(
            """
nodes:
  - id: ask
    approval:
      message: What should the title be?
      capture_response: true
  - id: use
    depends_on: [ask]
    bash: printf 'title=%s' $ask.output
""",
            interactive=True,
        ),
        actor=ENGINE,
    )
    wait_run(run, "paused")
    services.approve(gate_of(run).pk, Actor.operator(operator, "console"), comment="Loops, calmly")
    wait_run(run, "completed", "failed")
    assert node(run, "use").output == "title=Loops, calmly"


def test_interactive_loop_at_max_iterations_refuses_feedback_and_keeps_its_gate(
    live_worker, make_scripted_recipe, operator
):
    run = services.start_run(
        make_scripted_recipe(
            """
nodes:
  - id: refine
    loop:
      prompt: "@*: DONE"
      until: DONE
      max_iterations: 1
      interactive: true
      gate_message: ok?
""",
            interactive=True,
        ),
        actor=ENGINE,
    )
    wait_run(run, "paused")
    gate, actor = gate_of(run), Actor.operator(operator, "console")
    # No iteration is left for the feedback to run (tests/engine_worker/test_last_iteration_gate.py)
    with pytest.raises(services.Conflict, match="this loop's last"):
        services.approve(gate.pk, actor, comment="one more")
    services.approve(gate.pk, actor)
    wait_run(run, "failed", "completed")
    assert run.status == "completed"
