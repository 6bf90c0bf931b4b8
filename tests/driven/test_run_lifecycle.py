"""A driven run on the kernel: cancelled in the middle of a pipeline, its open loop ends
failed and the agents stop; a failed driven run resumes with a new turn of its host."""

from __future__ import annotations

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
    step = Iteration.objects.get(run=run, node_id="slow")
    assert step.status == "cancelled" and "working" in step.output
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
