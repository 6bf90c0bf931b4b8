"""The bundled driven recipe runs on a fresh machine with no network: its demo host starts
a loop, iterates with feedback and finishes it."""

import pytest

from loops.models import Loop
from runs import services
from tests.conftest import wait_run

pytestmark = pytest.mark.worker


def test_launch_note_starts_iterates_with_feedback_and_finishes(live_worker, bundled, operator):
    recipe = bundled["launch-note"]
    assert recipe.kind == "driven" and recipe.valid
    run = wait_run(services.start_run(recipe, user=operator, message="Widget 2.0, a faster sync"))
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
