"""The bundled driven recipe runs on a fresh machine with no network: its demo host starts
a loop, iterates with feedback and finishes it."""

from loops.driven.models import Loop
from runs import services
from runs.actor import Actor
from tests.conftest import wait_run


def test_launch_note_starts_iterates_with_feedback_and_finishes(live_worker, bundled, operator):
    recipe = bundled["launch-note"]
    assert recipe.kind == "driven" and recipe.valid
    run = wait_run(
        services.start_run(
            recipe, actor=Actor.operator(operator, "console"), message="Widget 2.0, a faster sync"
        )
    )
    assert run.status == "completed", run.error
    loop = Loop.objects.get(run=run)
    assert (loop.status, loop.iteration_count, loop.pipeline) == (
        "completed",
        3,
        ["researcher", "drafter"],
    )
    first, second, third = loop.iterations.order_by("number")
    assert first.input == "Widget 2.0, a faster sync"
    assert second.feedback and second.input["feedback"] == second.feedback
    # The feedback went down the pipeline: the drafter's revision says what it answered.
    assert f"Revised for the feedback: “{second.feedback}”" in second.output
    assert f"Revised for the feedback: “{third.feedback}”" in third.output
    assert loop.result == third.output
    answer = run.iterations.get(node_id="host").output
    assert "Satisfied after 3 iterations; finished." in answer


def test_a_fork_of_launch_note_is_judged_and_finished_by_its_demo_host(
    live_worker, bundled, operator
):
    """In a fork the loop is already open (the fork ran its next iteration with the
    person's feedback): the demo host closes that loop instead of saying no loop ran."""
    from runs.actor import Actor
    from runs.fork import make_fork

    run = wait_run(
        services.start_run(
            bundled["launch-note"], actor=Actor.operator(operator, "console"), message="Widget"
        )
    )
    assert run.status == "completed", run.error
    fork = make_fork(
        run, Actor.operator(operator, "console"), node="drafter", iteration=1, feedback="Shorter."
    )
    fork = wait_run(fork, "completed", "failed", "cancelled")
    assert fork.status == "completed", fork.error
    loop = Loop.objects.get(run=fork)
    assert (loop.status, loop.iteration_count) == ("completed", 2)
    assert loop.iterations.get(number=2).input["feedback"] == "Shorter."
    answer = fork.iterations.filter(node_id="host", carried_from=None).get().output
    assert "no loop ran" not in answer
    assert "Satisfied after 2 iterations; finished." in answer
