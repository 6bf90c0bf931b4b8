"""A host on an OpenAI-compatible or Anthropic API drives a loop through a real worker: it
starts a two-agent pipeline, iterates with feedback, finishes; the crumbs arrive in order
on the live stream; /api/loops/{id} replays both iterations. Then the ways a loop ends
otherwise (cap reached, the run failing with it open) and the calls a host gets refused."""

from __future__ import annotations

import json
import shutil

import pytest

from loops.driven.models import Loop
from runs.models import Conversation, Iteration, RunEvent
from tests.conftest import wait_run
from tests.driven import hooks
from tests.driven.conftest import api_get, crumbs_on_stream, driven_recipe, tool_messages


def openai_host(url: str) -> str:
    return f'ai: {{kind: openai, base_url: "{url}/v1", model: fake-model, api_key_env: FAKE_PROVIDER_KEY}}'


def anthropic_host(url: str) -> str:
    return f'ai: {{kind: anthropic, base_url: "{url}", model: fake-model, api_key_env: FAKE_PROVIDER_KEY}}'


def call(name: str, **arguments) -> dict:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


START = call("core_start_loop", pipeline=["researcher", "drafter"], input="Widget 2.0")
ITERATE = call("core_iterate_loop", feedback="Shorter, and say who it is for.")
FINISH = call("core_finish_loop")
# on_finish fires alongside every loop:end, however the loop ends.
ON_FINISH = 'hooks: {on_finish: "tests.driven.hooks:on_finish"}'


@pytest.fixture
def finish_calls():
    """The on_finish calls of a loop (tests.driven.hooks records them in the data folder)."""
    shutil.rmtree(hooks.calls_dir(), ignore_errors=True)

    def of(loop) -> list[tuple[str, dict]]:
        return [(c["hook"], c["ctx"]) for c in hooks.calls(loop.pk)]

    return of


def check_two_iterations_with_feedback(run, viewer):
    """What a user sees of the start → iterate with feedback → finish loop."""
    assert run.status == "completed", run.error
    loop = Loop.objects.get(run=run)
    assert (loop.status, loop.iteration_count, loop.agent) == ("completed", 2, "host")

    crumbs = crumbs_on_stream(viewer, run)
    assert [name for name, _ in crumbs] == [
        "loop:start",
        "loop:iteration:start",
        "loop:iteration:end",
        "loop:iteration:start",
        "loop:iteration:end",
        "loop:end",
    ]
    start, first_start, first_end, second_start, second_end, end = (data for _, data in crumbs)
    assert start == {"loopId": loop.pk, "pipeline": ["researcher", "drafter"], "maxIterations": 3}
    assert first_start == {"loopId": loop.pk, "iteration": 1}
    assert set(first_end) == {"loopId", "iteration", "output"} and first_end["iteration"] == 1
    assert second_start == {"loopId": loop.pk, "iteration": 2}
    assert end == {
        "loopId": loop.pk,
        "status": "completed",
        "iterations": 2,
        "result": second_end["output"],
    }

    detail = api_get(viewer, f"/api/loops/{loop.pk}")
    assert detail["loop"]["status"] == "completed" and detail["loop"]["session"] == run.pk
    one, two = detail["iterations"]
    assert one["input"] == "Widget 2.0" and one["feedback"] == ""
    assert one["output"] == first_end["output"] and "Demo agent" in one["output"]
    assert two["input"] == {
        "previousOutput": one["output"],
        "feedback": "Shorter, and say who it is for.",
    }
    assert two["output"] == second_end["output"]
    assert [s["agent"] for s in one["steps"]] == ["researcher", "drafter"]
    assert all(s["status"] == "completed" for s in one["steps"] + two["steps"])
    assert one["started_at"] and one["duration_ms"] is not None

    # Each step's output fed the next; the feedback reached the second iteration's pipeline.
    researcher, drafter = (Iteration.objects.get(pk=s["iteration"]) for s in one["steps"])
    assert researcher.prompt.startswith("Collect the facts.") and "Widget 2.0" in researcher.prompt
    assert json.dumps(researcher.structured, ensure_ascii=False, indent=2) in drafter.prompt
    second_researcher = Iteration.objects.get(pk=two["steps"][0]["iteration"])
    assert "Shorter, and say who it is for." in second_researcher.prompt
    # The host's turn is an iteration of the run too, and its tool calls are on the log.
    host_turn = Iteration.objects.get(run=run, node_id="host")
    assert host_turn.output == "The note is ready." and "core_start_loop" in host_turn.prompt
    assert [e.data["tool"] for e in RunEvent.objects.filter(run=run, kind="agent_tool")] == [
        "core_start_loop",
        "core_iterate_loop",
        "core_finish_loop",
    ]
    return loop


def test_an_openai_host_starts_iterates_with_feedback_and_finishes(
    live_worker, start_driven, fake_ai, viewer
):
    fake_ai.answers = [START, ITERATE, FINISH, "The note is ready."]
    run = wait_run(start_driven(driven_recipe("ai", providers=openai_host(fake_ai.url))))
    loop = check_two_iterations_with_feedback(run, viewer)

    first, second, third, last = fake_ai.requests
    assert [t["function"]["name"] for t in first["body"]["tools"]] == [
        "core_start_loop",
        "core_iterate_loop",
        "core_finish_loop",
    ]
    started = json.loads(tool_messages(second)[-1])
    assert started["loopId"] == loop.pk and started["iteration"] == 1
    assert started["maxIterations"] == 3 and started["canIterate"] is True
    assert "Demo agent" in started["output"]
    iterated = json.loads(tool_messages(third)[-1])
    assert iterated["iteration"] == 2 and iterated["canIterate"] is True
    finished = json.loads(tool_messages(last)[-1])
    assert finished == {
        "loopId": loop.pk,
        "status": "completed",
        "iterations": 2,
        "result": iterated["output"],
    }
    # The host's conversation (tool calls and results included) is kept by the executor.
    host_turn = Iteration.objects.get(run=run, node_id="host")
    kept = Conversation.objects.get(session_id=host_turn.session_id).messages
    assert [m["role"] for m in kept].count("tool") == 3


def test_an_anthropic_host_does_the_same_with_tool_use_blocks(
    live_worker, start_driven, fake_ai, viewer
):
    fake_ai.answers = [START, ITERATE, FINISH, "The note is ready."]
    run = wait_run(start_driven(driven_recipe("ai", providers=anthropic_host(fake_ai.url))))
    loop = check_two_iterations_with_feedback(run, viewer)

    second = fake_ai.requests[1]["body"]["messages"]
    uses = [b for b in second[-2]["content"] if b["type"] == "tool_use"]
    (result,) = second[-1]["content"]
    assert uses[0]["name"] == "core_start_loop" and result["tool_use_id"] == uses[0]["id"]
    assert json.loads(result["content"])["loopId"] == loop.pk


def test_past_the_cap_the_loop_closes_as_exhausted(
    live_worker, start_driven, fake_ai, viewer, finish_calls
):
    iterate_again = call("core_iterate_loop")
    fake_ai.answers = [START, ITERATE, iterate_again, "It ran out of iterations."]
    source = driven_recipe(
        "ai", providers=openai_host(fake_ai.url), max_iterations=2, loop_extra=ON_FINISH
    )
    run = wait_run(start_driven(source))
    assert run.status == "completed", run.error
    loop = Loop.objects.get(run=run)
    assert (loop.status, loop.iteration_count) == ("exhausted", 2)
    second = json.loads(tool_messages(fake_ai.requests[2])[-1])
    assert second["iteration"] == 2 and second["canIterate"] is False
    closed = json.loads(tool_messages(fake_ai.requests[3])[-1])
    assert closed["status"] == "exhausted" and closed["canIterate"] is False
    assert closed["result"] == second["output"] == loop.result
    name, end = crumbs_on_stream(viewer, run)[-1]
    assert name == "loop:end"
    assert end == {"loopId": loop.pk, "status": "exhausted", "iterations": 2, "result": loop.result}
    assert finish_calls(loop) == [
        ("on_finish", {"loopId": loop.pk, "status": "exhausted", "iterations": 2})
    ]


def test_a_run_that_errors_with_a_loop_open_fails_it(
    live_worker, start_driven, fake_ai, viewer, finish_calls
):
    def start_then_break(body):
        fake_ai.fail_next(400)  # the host's next request is refused: a permanent error
        return START

    fake_ai.answers = [start_then_break]
    source = driven_recipe("ai", providers=openai_host(fake_ai.url), loop_extra=ON_FINISH)
    run = wait_run(start_driven(source))
    assert run.status == "failed" and "HTTP 400" in run.error
    loop = Loop.objects.get(run=run)
    assert (loop.status, loop.iteration_count) == ("failed", 1)
    assert "the host's turn failed" in loop.error
    name, end = crumbs_on_stream(viewer, run)[-1]
    assert (name, end) == ("loop:end", {"loopId": loop.pk, "status": "failed", "iterations": 1})
    assert finish_calls(loop) == [
        ("on_finish", {"loopId": loop.pk, "status": "failed", "iterations": 1})
    ]


def test_a_run_that_ends_with_a_loop_open_completes_it(
    live_worker, start_driven, fake_ai, finish_calls
):
    fake_ai.answers = [START, "Good enough, I stop here."]
    source = driven_recipe("ai", providers=openai_host(fake_ai.url), loop_extra=ON_FINISH)
    run = wait_run(start_driven(source))
    assert run.status == "completed", run.error
    loop = Loop.objects.get(run=run)
    assert loop.status == "completed" and loop.result == loop.last_output
    assert loop.iterations.get().output == loop.result
    assert finish_calls(loop) == [
        ("on_finish", {"loopId": loop.pk, "status": "completed", "iterations": 1})
    ]


def test_refused_calls_are_tool_errors_and_the_host_goes_on(
    live_worker, start_driven, fake_ai, viewer
):
    fake_ai.answers = [
        call("core_iterate_loop", feedback="too early"),
        call("core_start_loop", pipeline=["researcher", "outsider"]),
        call("core_start_loop", pipeline=["researcher"]),
        call("core_start_loop", pipeline=["drafter"]),
        call("core_finish_loop", result={"note": "done"}),
        call("core_finish_loop"),
        "Finished after a few refusals.",
    ]
    run = wait_run(start_driven(driven_recipe("ai", providers=openai_host(fake_ai.url))))
    assert run.status == "completed", run.error
    answers = [tool_messages(r)[-1] for r in fake_ai.requests[1:]]
    assert answers[0] == "no open loop: call core_start_loop first"
    assert answers[1].startswith("'outsider' is not in your pool (researcher, drafter)")
    assert json.loads(answers[2])["iteration"] == 1
    assert answers[3].startswith("loop 1 is still open") or "is still open" in answers[3]
    assert json.loads(answers[4])["result"] == {"note": "done"}
    assert answers[5] == "no open loop: call core_start_loop first"
    loop = Loop.objects.get(run=run)
    assert (loop.pipeline, loop.status, loop.result) == (
        ["researcher"],
        "completed",
        {"note": "done"},
    )
    oks = [e.data["ok"] for e in RunEvent.objects.filter(run=run, kind="agent_tool")]
    assert oks == [False, False, True, False, True, False]
    assert [name for name, _ in crumbs_on_stream(viewer, run)] == [
        "loop:start",
        "loop:iteration:start",
        "loop:iteration:end",
        "loop:end",
    ]
