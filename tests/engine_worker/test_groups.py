"""loop_group nodes: a sealed body re-run in full, $LOOP_PREV, gates, failures."""

from runs import services
from runs.actor import ENGINE, Actor
from runs.models import RunEvent
from tests.conftest import pending_gate, wait_for, wait_run

from .conftest import calls, node

BODY = """
nodes:
  - id: fix
    loop_group:
      until_bash: test $test.output = "green"
      max_iterations: 4
      nodes:
        - id: implement
          prompt: "prev-test=[$LOOP_PREV.test.output]\\n@*: patched"
        - id: repair
          depends_on: [implement]
          when: "$LOOP_PREV.test.output == 'red'"
          bash: echo repaired
        - id: test
          depends_on: [implement]
          bash: |
            echo x >> attempts
            if [ $(wc -l < attempts) -ge 3 ]; then printf green; else printf red; fi
  - id: report
    depends_on: [fix]
    bash: printf 'final=%s' $fix.output
"""


def test_group_reruns_its_body_until_the_check_passes(live_worker, make_scripted_recipe):
    run = services.start_run(make_scripted_recipe(BODY), actor=ENGINE)
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    group = node(run, "fix")
    assert group.iteration_count == 3 and group.output == "green"
    assert node(run, "report").output == "final=green"
    prompts = [c["prompt"] for c in calls(run)]
    assert "prev-test=[]" in prompts[0] and "prev-test=[red]" in prompts[1]
    body = run.nodes.filter(node_id="fix.repair").order_by("iteration")
    # iteration 1 has no previous test output, so its `when` is false
    assert [r.status for r in body] == ["skipped", "completed", "completed"]
    steps = set(RunEvent.objects.filter(run=run).values_list("step", flat=True))
    assert {"fix.implement", "fix.test", "fix.repair"} <= steps
    assert [it.channels for it in run.iterations.filter(node_id="fix").order_by("number")] == [
        [],
        [],
        ["until_bash"],
    ]


def test_a_failed_body_node_fails_the_group_at_once(live_worker, make_scripted_recipe):
    run = services.start_run(
        make_scripted_recipe("""
nodes:
  - id: g
    loop_group:
      until: DONE
      max_iterations: 3
      nodes:
        - id: a
          bash: "exit 4"
"""),
        actor=ENGINE,
    )
    wait_run(run, "completed", "failed")
    assert run.status == "failed"
    group = node(run, "g")
    assert group.iteration_count == 1 and "g.a" in group.error and "status 4" in group.error


def test_group_signal_comes_from_the_terminal_node(live_worker, make_scripted_recipe):
    run = services.start_run(
        make_scripted_recipe("""
nodes:
  - id: g
    loop_group:
      until: SHIPPED
      max_iterations: 3
      nodes:
        - id: write
          prompt: "@*: words"
        - id: check
          depends_on: [write]
          prompt: "@1: not yet\\n@2: <promise>SHIPPED</promise>"
"""),
        actor=ENGINE,
    )
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    assert node(run, "g").iteration_count == 2
    assert "promise" not in node(run, "g").output.lower()


def test_interactive_group_gates_and_restores_loop_prev(
    live_worker, make_scripted_recipe, operator
):
    run = services.start_run(
        make_scripted_recipe("""
interactive: true
nodes:
  - id: g
    loop_group:
      until: OK
      max_iterations: 3
      interactive: true
      gate_message: Look at the pair.
      nodes:
        - id: write
          prompt: "prev=[$LOOP_PREV.write.output] input=[$LOOP_USER_INPUT]\\n@*: text"
"""),
        actor=ENGINE,
    )
    wait_run(run, "paused")
    gate = wait_for(lambda: pending_gate(run), 30)
    services.approve(gate.pk, Actor.operator(operator, "console"), comment="tighter")
    wait_for(lambda: run.gates.filter(status="pending").exclude(pk=gate.pk).exists(), 30)
    prompts = [c["prompt"] for c in calls(run)]
    assert "prev=[] input=[]" in prompts[0]
    assert "prev=[text] input=[tighter]" in prompts[1]
    services.cancel_run(run, Actor.operator(operator, "console"))


def test_writer_reviewer_bundled_recipe_stops_at_score_80(live_worker, bundled):
    run = services.start_run(bundled["writer-reviewer"], actor=ENGINE, message="a loop console")
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    reviews = run.nodes.filter(node_id="draft-loop.review").order_by("iteration")
    assert [r.structured["score"] for r in reviews] == [55, 70, 85]
