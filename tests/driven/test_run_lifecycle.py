"""A driven run on the kernel: cancelled in the middle of a pipeline, its open loop ends
failed and the agents stop; a failed driven run resumes with a new turn of its host."""

from __future__ import annotations

import pytest

from loops.driven.models import Loop
from runs import services
from runs.actor import Actor
from runs.models import Iteration
from tests.conftest import wait_for, wait_run
from tests.driven.conftest import driven_recipe
from tests.driven.test_http_hosts import FINISH, START, openai_host


def test_cancelling_mid_pipeline_fails_the_open_loop(live_worker, start_driven, operator, tmp_path):
    never = tmp_path / "never"
    host = "host-agent: {kind: demo, tool_calls: [{name: core_start_loop, arguments: {pipeline: [slow]}}]}"
    slow = f'slow-agent: {{kind: command, command: "echo working; until [ -e {never} ]; do sleep 0.1; done"}}'
    source = driven_recipe(
        "host-agent",
        pool="[researcher, drafter, slow]",
        providers=host + "\n" + slow,
        agents="slow: {provider: slow-agent, instructions: Take your time.}",
    )
    run = start_driven(source)
    wait_for(
        lambda: Iteration.objects.filter(run=run, node_id="slow", status="running").exists(),
        60,
        message="the slow step running",
    )
    services.cancel_run(run, Actor.operator(operator, "console"))
    loop = wait_for(
        lambda: Loop.objects.filter(run=run, status="failed").first(), 60, message="loop failed"
    )
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert loop.iteration_count == 1 and loop.iterations.get().status == "failed"
    # The loop ends with the run (in the cancel's own transaction); the step's output is
    # kept once its worker has stopped the agent.
    step = wait_for(
        lambda: (
            Iteration.objects.filter(run=run, node_id="slow", output__contains="working")
            .exclude(status="running")
            .first()
        ),
        60,
        message="the slow step's output kept",
    )
    assert step.status == "cancelled"
    assert run.events.filter(kind="loop:end").get().data == {
        "loopId": loop.pk,
        "status": "failed",
        "iterations": 1,
    }


def test_a_failed_driven_run_resumes_with_a_new_turn(live_worker, start_driven, fake_ai, operator):
    fake_ai.fail_next(400)
    run = wait_run(start_driven(driven_recipe("ai", providers=openai_host(fake_ai.url))))
    assert run.status == "failed" and not Loop.objects.filter(run=run).exists()

    fake_ai.answers = [START, FINISH, "Done on the second try."]
    services.resume_run(run, Actor.operator(operator, "console"))
    run = wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    first, second = Iteration.objects.filter(run=run, node_id="host").order_by("id")
    assert (first.status, second.status) == ("failed", "completed")
    assert second.generation == first.generation + 1
    loop = Loop.objects.get(run=run)
    assert loop.host_iteration_id == second.pk and loop.status == "completed"


@pytest.mark.django_db
@pytest.mark.parametrize("ending", ["failed", "cancelled", "completed"])
def test_a_run_that_ends_leaves_no_loop_open_nor_its_iteration_running(driven_run, ending):
    """However a driven run ends (its worker lost three times and the sweep failing it,
    a cancel, a completion the host did not close its loop before), its loops end with it
    (issue 42)."""
    from django.db import transaction

    from loops.driven.models import LoopIteration

    run, _, turn = driven_run
    with transaction.atomic():
        loop = Loop.open(
            run,
            host_iteration=turn,
            agent="host",
            pipeline=["drafter"],
            input="x",
            max_iterations=3,
        )
        loop.begin_iteration(run, input="x")
    with transaction.atomic():
        assert run.set_status(ending, error="the worker was lost 3 times")
    assert not Loop.objects.filter(run=run, status=Loop.Status.OPEN).exists()
    assert not LoopIteration.objects.filter(
        loop__run=run, status=LoopIteration.Status.RUNNING
    ).exists()
    loop.refresh_from_db()
    assert loop.status == "failed" and f"the run ended ({ending})" in loop.error
