"""Seed 000 (workflow loop nodes): every example of the design, run on the demo provider."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from runs import services
from runs.actor import ENGINE, Actor
from runs.models import Gate
from tests.conftest import pending_gate, wait_for, wait_run

EXAMPLES = Path(__file__).parent / "seed000"
pytestmark = pytest.mark.django_db(transaction=True)


def example(name: str) -> str:
    return (EXAMPLES / f"{name}.yaml").read_text()


def workflow(name: str, *, siblings: str = "", interactive: bool = False) -> str:
    """The example as a runnable recipe on the demo provider: a whole workflow as written,
    a node (or a `loop_group:` block) placed in `nodes:` after `siblings`."""
    text = example(name)
    head = "provider: demo\n" + ("interactive: true\n" if interactive else "")
    if text.startswith("name:"):
        return head + text
    head += f"name: {name}\n"
    if text.startswith("nodes:"):
        return head + text
    if not text.lstrip().startswith("- id:"):  # a block: the node around it is ours
        text = f"- id: {name}\n" + textwrap.indent(text, "  ")
    return head + "nodes:\n" + textwrap.indent(siblings + text, "  ")


@pytest.fixture
def start(live_worker, make_recipe):
    def go(source: str, slug: str, **kwargs):
        return services.start_run(
            make_recipe(source, slug=slug), kwargs.pop("actor", ENGINE), **kwargs
        )

    return go


def node(run, node_id):
    return run.nodes.get(node_id=node_id, iteration=0)


def channels(run, node_id):
    return [it.channels for it in run.iterations.filter(node_id=node_id).order_by("number")]


def gate_after(run, previous=None):
    return wait_for(
        lambda: (g := pending_gate(run)) and g.pk != getattr(previous, "pk", None) and g,
        60,
        message="a new gate",
    )


def test_quick_start_completes_when_the_agent_says_complete(start):
    run = start(workflow("quick-start"), "quick-start", message="Build the todo app")
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    implement = node(run, "implement")
    assert implement.iteration_count == 3 and implement.max_iterations == 10
    assert channels(run, "implement") == [[], [], ["until"]]
    first = run.iterations.get(node_id="implement", number=1)
    assert "Setup context: Found 3 stories to implement" in first.prompt
    assert "User request: Build the todo app" in first.prompt
    # fresh_context: true: every iteration is the first turn of a new session
    assert all("turn 1 of session" in it.output for it in run.iterations.all())
    assert "<promise>" not in implement.output  # the signal tags are stripped
    assert "All done." in node(run, "report").state["prompt"]
    assert not run.gates.exists()


def test_triage_ends_on_the_validated_boolean(start):
    run = start(workflow("triage"), "triage")
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    triage = node(run, "triage")
    assert channels(run, "triage")[-1] == ["until_field"]
    assert json.loads(triage.output)["done"] is True and triage.structured["done"] is True


def test_the_loop_group_equivalent_ends_on_its_bash_check(start):
    run = start(workflow("loop-group-equivalent"), "loop-group-equivalent")
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    group = node(run, "loop-group-equivalent")
    assert channels(run, "loop-group-equivalent")[-1] == ["until_bash"]
    assert json.loads(group.output)["done"] is True


def test_ralph_without_its_signal_runs_to_max_iterations_and_fails(start):
    setup = "- id: setup\n  bash: echo three-stories\n"
    run = start(workflow("ralph", siblings=setup), "ralph")
    wait_run(run, "completed", "failed", timeout=180)
    # The demo agent says COMPLETE only when asked to "output" it: the design's rule for a
    # loop no channel ends is that the node fails with a descriptive error.
    assert run.status == "failed"
    implement = node(run, "implement")
    assert implement.iteration_count == 15
    assert "reached max_iterations (15) without meeting a completion condition" in (implement.error)
    assert "Project context: three-stories" in run.iterations.get(number=1).prompt


def test_implement_and_qa_sees_the_previous_output(start):
    run = start(workflow("implement-and-qa"), "implement-and-qa")
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    assert channels(run, "implement-and-qa") == [[], [], ["until"]]
    prompts = [it.prompt for it in run.iterations.order_by("number")]
    assert "(empty on first pass):\n\nUse the above" in prompts[0]
    assert "Demo agent: iteration 1" in prompts[1]


def test_refine_threads_one_session_and_fails_at_its_cap(start):
    run = start(workflow("refine"), "refine")
    wait_run(run, "completed", "failed", timeout=120)
    assert run.status == "failed"
    outputs = [it.output for it in run.iterations.order_by("number")]
    assert len(outputs) == 5
    assert [f"turn {n} of session" in out for n, out in enumerate(outputs, 1)] == [True] * 5
    assert "reached max_iterations (5)" in node(run, "refine").error


@pytest.mark.parametrize("name", ["fix-tests", "fix-tests-bash-only"])
def test_fix_tests_never_passes_without_a_test_suite(start, name):
    run = start(workflow(name), name)
    wait_run(run, "completed", "failed", timeout=180)
    # No package.json: `bun run test` fails on every iteration (or bun is missing).
    assert run.status == "failed"
    fix = node(run, "fix-tests")
    assert fix.iteration_count == 8 and "reached max_iterations (8)" in fix.error


def test_validate_gates_on_failure_and_passes_through_on_its_signal(start, operator):
    run = start(workflow("validate"), "validate")
    actor = Actor.operator(operator, "console")
    first = gate_after(run)
    assert not first.completion_signaled
    assert first.message.rstrip().endswith("review the failures above.")
    services.approve(first.pk, actor, comment="try again")
    second = gate_after(run, first)
    services.approve(second.pk, actor)  # nothing completed: a bare approve iterates too
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    assert channels(run, "validate") == [[], [], ["until"]]
    assert run.gates.count() == 2  # signal_completes: no gate on the completing iteration


def test_guided_refine_feedback_iterates_and_a_bare_approve_finalizes(start, operator):
    run = start(workflow("guided-refine"), "guided-refine")
    actor = Actor.operator(operator, "console")
    first = gate_after(run)
    services.approve(first.pk, actor, comment="make it about snow")
    second = gate_after(run, first)
    assert "feedback: make it about snow" in run.iterations.get(number=2).prompt
    services.approve(second.pk, actor)
    third = gate_after(run, second)
    assert third.completion_signaled
    assert "feedback: \n" in run.iterations.get(number=3).prompt  # only the next iteration
    services.approve(third.pk, actor)  # no feedback on a completed iteration: finalize
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    assert node(run, "refine").iteration_count == 3
    assert run.iterations.count() == 3  # no re-run
    assert Gate.objects.get(pk=third.pk).status == "accepted"


def test_fix_until_green_runs_its_body_per_iteration_and_fails_at_the_cap(start):
    run = start(workflow("fix-until-green"), "fix-until-green")
    wait_run(run, "completed", "failed", timeout=240)
    assert run.status == "failed"
    group = node(run, "fix-loop")
    assert group.iteration_count == 5 and "reached max_iterations (5)" in group.error
    for body in ("implement", "test", "review"):
        rows = run.nodes.filter(node_id=f"fix-loop.{body}")
        assert sorted(rows.values_list("iteration", flat=True)) == [1, 2, 3, 4, 5]
    assert set(run.nodes.filter(node_id="fix-loop.test").values_list("output", flat=True)) == {
        "red"
    }


def test_loop_prev_reads_the_previous_iterations_test_output(start):
    run = start(workflow("loop-prev"), "loop-prev")
    wait_run(run, "completed", "failed", timeout=240)
    assert run.status == "failed" and "reached max_iterations (5)" in node(run, "fix-loop").error
    prompts = dict(
        run.nodes.filter(node_id="fix-loop.implement").values_list("iteration", "state__prompt")
    )
    assert "Previous attempt's test output:\n\nFix what failed." in prompts[1]
    assert "Previous attempt's test output:\nred\nFix what failed." in prompts[2]


def test_repair_runs_only_after_a_red_iteration(start):
    group = textwrap.dedent("""\
        - id: g
          loop_group:
            until_bash: test $test.output = "green"
            max_iterations: 2
            nodes:
              - id: test
                bash: if [ -f repaired ]; then printf green; else printf red; fi
        """)
    repair = textwrap.indent(example("repair-when"), " " * 8)
    source = f"provider: demo\nname: repair\nnodes:\n{textwrap.indent(group, '  ')}{repair}"
    run = start(source, "repair-when")
    wait_run(run, "completed", "failed", timeout=120)
    rows = list(run.nodes.filter(node_id="g.repair").order_by("iteration"))
    assert rows[0].status == "skipped" and "when condition is false" in rows[0].skip_reason
    assert rows[1].status == "completed"  # iteration 2: the previous test said red


def test_loop_command_reads_its_command_file(start, make_recipe, tmp_path):
    folder = tmp_path / "project"
    (folder / "commands").mkdir(parents=True)
    (folder / "commands" / "archon-ralph-implement.md").write_text(
        "Implement the next story of $generate-prd.output. When all are done, output: COMPLETE\n"
    )
    prd = '- id: generate-prd\n  bash: echo "the PRD"\n'
    source = workflow("command", siblings=prd)
    path = folder / "command.yaml"
    path.write_text(source)
    recipe = make_recipe(source, slug="command", origin="project", source_path=str(path))
    run = services.start_run(recipe, actor=ENGINE)
    wait_run(run, "completed", "failed", timeout=120)
    assert run.status == "completed", run.error
    assert channels(run, "implement")[-1] == ["until"]
    assert "Implement the next story of the PRD." in run.iterations.get(number=1).prompt


def test_converge_reads_the_included_blocks_output(start, make_recipe, tmp_path):
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "reusable-review.yaml").write_text(
        textwrap.dedent("""\
            name: reusable-review
            nodes:
              - id: verdict
                output_format:
                  type: object
                  properties: {ready: {type: boolean}, score: {type: integer}}
                  required: [ready, score]
                prompt: "Review: $INPUTS.request"
            returns: verdict
            """)
    )
    source = "inputs:\n  request: {type: text}\n" + workflow("converge")
    path = folder / "converge.yaml"
    path.write_text(source)
    recipe = make_recipe(source, slug="converge", origin="project", source_path=str(path))
    run = services.start_run(recipe, actor=ENGINE, inputs={"request": "the login page"})
    wait_run(run, "completed", "failed", timeout=120)
    assert run.status == "completed", run.error
    assert channels(run, "converge")[-1] == ["until_bash"]
    assert json.loads(node(run, "converge").output)["ready"] is True
