"""Fork from an iteration: a new run carries the history up to it (copies linked to the
originals, never executed again) and goes on with new feedback or a new prompt, through the
kernel's own transitions. Workflow loops, loop_groups and Python loops."""

import pytest

from runs import services
from runs.actor import ENGINE, Actor
from runs.errors import Conflict, InputError, NotFound
from runs.event_text import describe
from runs.models import Run
from tests.conftest import wait_run

from .conftest import calls, iterations, node

LOOP = """
nodes:
  - id: prep
    bash: echo prepared
  - id: work
    depends_on: [prep]
    loop:
      prompt: "Do it. Feedback: $LOOP_USER_INPUT\\n@1: first try\\n@2: second\\n@3: <promise>DONE</promise>\\n@*: more"
      until: DONE
      max_iterations: 6
  - id: after
    depends_on: [work]
    bash: printf 'after %s' $work.output
"""


@pytest.fixture
def cli(operator):
    return Actor.operator(operator, "console")


def test_fork_a_workflow_loop_carries_history_and_continues_with_feedback(
    live_worker, make_scripted_recipe, cli
):
    original = services.start_run(make_scripted_recipe(LOOP), actor=ENGINE, message="go")
    wait_run(original)
    assert original.status == "completed", original.error
    before = (original.iterations.count(), original.events.count(), original.last_seq)
    first = iterations(original, "work")[0]

    fork = services.fork_run(original, cli, node="work", iteration=1, feedback="be bolder")
    wait_run(fork)
    assert fork.status == "completed", fork.error
    assert (
        fork.forked_from_id == original.pk and fork.recipe_version_id == original.recipe_version_id
    )
    its = iterations(fork, "work")
    assert [it.number for it in its] == [1, 2, 3]
    carried = its[0]
    assert carried.carried_from_id == first.pk and carried.output == first.output
    assert [it.carried_from_id for it in its[1:]] == [None, None]
    # Iteration 2 was started with the fork's feedback; iteration 1 never ran again.
    assert its[1].feedback == "be bolder" and "Feedback: be bolder" in its[1].prompt
    assert [c["iteration"] for c in calls(fork)] == [2, 3]
    # The node that had finished before the fork point is carried, not re-run.
    prep = node(fork, "prep")
    assert prep.carried_from_id == node(original, "prep").pk
    assert not (fork.events.filter(kind="node_started", step="prep").exists())
    assert node(fork, "after").output.startswith("after")
    # The original is untouched.
    original.refresh_from_db()
    assert (original.iterations.count(), original.events.count(), original.last_seq) == before
    assert list(original.forks.all()) == [fork]
    forked = fork.events.get(kind="run_forked")
    assert forked.data["from_run"] == original.pk and forked.data["iteration"] == 1
    assert describe(forked) == (
        f"otto forked run {original.pk} after work iteration 1: 1 iteration(s) carried over "
        "with the feedback “be bolder”."
    )


def test_fork_resumes_the_threaded_session_and_an_edited_prompt(
    live_worker, make_scripted_recipe, cli
):
    original = services.start_run(make_scripted_recipe(LOOP), actor=ENGINE)
    wait_run(original)
    second = iterations(original, "work")[1]
    fork = services.fork_run(
        original,
        cli,
        node="work",
        iteration=2,
        prompt="New plan $LOOP_PREV_OUTPUT\n@*: DONE!\n@3: <promise>DONE</promise>",
    )
    wait_run(fork)
    assert fork.status == "completed", fork.error
    its = iterations(fork, "work")
    assert [it.number for it in its] == [1, 2, 3]
    assert its[2].prompt.startswith("New plan second")  # the previous output is iteration 2's
    made = calls(fork)
    assert len(made) == 1 and made[0]["iteration"] == 3
    if second.session_id:
        assert made[0]["session"] == second.session_id and made[0]["resume"]


def test_fork_refuses_what_it_cannot_continue(live_worker, make_scripted_recipe, cli):
    original = services.start_run(make_scripted_recipe(LOOP), actor=ENGINE)
    wait_run(original)
    with pytest.raises(NotFound, match="no iteration 9"):
        services.fork_run(original, cli, node="work", iteration=9)
    short = services.start_run(
        make_scripted_recipe("""
nodes:
  - id: work
    loop: {prompt: "@*: going", until: DONE, max_iterations: 2}
"""),
        actor=ENGINE,
    )
    wait_run(short)
    assert short.status == "failed"
    with pytest.raises(Conflict, match="last 'work' may run"):
        services.fork_run(short, cli, node="work", iteration=2)
    assert Run.objects.filter(forked_from__isnull=False).count() == 0


GROUP = """
nodes:
  - id: refine
    loop_group:
      max_iterations: 5
      until: SHIPPED
      nodes:
        - id: draft
          prompt: "Draft. Feedback: $LOOP_USER_INPUT\\n@1: d1\\n@2: d2\\n@3: d3\\n@*: dx"
        - id: check
          depends_on: [draft]
          bash: "if [ \\"$draft.output\\" = d3 ]; then echo SHIPPED; else echo again; fi"
"""


def test_fork_a_loop_group_from_a_group_iteration(live_worker, make_scripted_recipe, cli):
    original = services.start_run(make_scripted_recipe(GROUP), actor=ENGINE)
    wait_run(original)
    assert original.status == "completed", original.error
    assert original.iterations.filter(node_id="refine").count() == 3
    # ... and each of the draft's calls is an iteration of its own row (one per group
    # iteration, numbered after it), as every agent call is
    drafts = original.iterations.filter(node_id="refine.draft")
    assert sorted(drafts.values_list("number", flat=True)) == [1, 2, 3]
    fork = services.fork_run(original, cli, node="refine", iteration=1, feedback="shorter")
    wait_run(fork)
    assert fork.status == "completed", fork.error
    its = iterations(fork, "refine")
    assert [it.number for it in its] == [1, 2, 3]
    assert its[0].carried_from_id is not None and its[1].feedback == "shorter"
    body_one = fork.nodes.filter(node_id="refine.draft", iteration=1).get()
    assert body_one.carried_from_id is not None and body_one.output == "d1"
    carried_call = body_one.iterations.get()  # the step's agent call comes with it
    assert carried_call.carried_from_id is not None and carried_call.number == 1
    drafts = [c for c in calls(fork)]
    assert [c["iteration"] for c in drafts] == [2, 3]
    assert "Feedback: shorter" in drafts[0]["prompt"]
    with pytest.raises(InputError):
        services.fork_run(original, cli, node="refine", iteration=1, prompt="x")


def test_fork_a_python_loop_replays_up_to_the_fork_point(live_worker, python_recipe, cli):
    original = services.start_run(python_recipe(max_iterations=5), actor=ENGINE, message="Topic")
    wait_run(original)
    assert original.status == "completed", original.error
    done = iterations(original, "writer")
    assert len(done) == 4  # the demo agent's score reaches 100 at iteration 4
    fork = services.fork_run(original, cli, node="writer", iteration=2, feedback="be brief")
    wait_run(fork)
    assert fork.status == "completed", fork.error
    its = iterations(fork, "writer")
    assert [it.number for it in its][:3] == [1, 2, 3]
    assert [bool(it.carried_from_id) for it in its[:3]] == [True, True, False]
    assert "be brief" in its[2].prompt
    # Replayed, not re-asked: the carried calls keep their original ids' outputs.
    assert its[1].output == done[1].output
    assert not fork.events.filter(kind="iteration_started", data__iteration=1).exists()
