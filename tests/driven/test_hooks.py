"""Loop hooks through a real worker: each fires at its moment with its context;
on_iteration_end can replace what the host sees (the stored iteration and the crumb keep
the raw output); on_error recovers, retries (bounded by `retry`) or fails; a hook that
raises fails the loop with its message. The hosts are the demo agent making scripted
calls, so each case runs exactly the calls it means to."""

from __future__ import annotations

import json
import shutil

import pytest

from loops.driven.models import Loop, LoopIteration
from runs.models import Iteration
from tests.conftest import wait_run
from tests.driven import hooks
from tests.driven.conftest import crumbs_on_stream, driven_recipe

H = "tests.driven.hooks"
ALWAYS_FAILS = 'flaky: {kind: command, command: "echo broken; exit 3"}'
# Fails on its first call in a run's working folder, then works.
FAILS_ONCE = (
    'flaky: {kind: command, command: "if [ -e .flaky-once ]; then echo fixed; '
    'else touch .flaky-once; echo broken; exit 3; fi"}'
)
FLAKY_AGENT = "flaky: {provider: flaky, instructions: Try your best.}"


@pytest.fixture(autouse=True)
def fresh_hook_calls():
    shutil.rmtree(hooks.calls_dir(), ignore_errors=True)


def hooked(**functions: str) -> str:
    """A `hooks:` mapping naming functions of tests.driven.hooks."""
    return (
        "{" + ", ".join(f"{name}: {json.dumps(H + ':' + f)}" for name, f in functions.items()) + "}"
    )


def scripted_host(*calls) -> str:
    """The host: the demo agent making exactly these calls, whatever they answer."""
    script = json.dumps([{"name": name, "arguments": args} for name, args in calls])
    return f"host-agent: {{kind: demo, tool_calls: {script}}}"


START = ("core_start_loop", {"pipeline": ["researcher", "drafter"]})
START_FLAKY = ("core_start_loop", {"pipeline": ["flaky"]})
FEEDBACK = ("core_iterate_loop", {"feedback": "Make it shorter."})
AGAIN = ("core_iterate_loop", {})
FINISH = ("core_finish_loop", {})


def run_driven(
    start_driven,
    *calls,
    hooks_block: str,
    flaky: str = "",
    retry: int = 0,
    retry_spelling: str = "retry: {}",
):
    providers = scripted_host(*calls) + ("\n" + flaky if flaky else "")
    source = driven_recipe(
        "host-agent",
        pool="[researcher, drafter, flaky]" if flaky else "[researcher, drafter]",
        providers=providers,
        agents=FLAKY_AGENT if flaky else "",
        loop_extra=f"hooks: {hooks_block}\n" + retry_spelling.format(retry),
    )
    run = wait_run(start_driven(source, message="Widget 2.0"))
    assert run.status == "completed", run.error
    return run, Loop.objects.get(run=run)


def host_answer(run) -> str:
    return Iteration.objects.get(run=run, node_id="host").output


def test_every_hook_fires_at_its_moment_with_its_context(live_worker, start_driven):
    every = hooked(
        **{n: n for n in ("on_init", "on_iteration_start", "on_iteration_end", "on_finish")}
    )
    run, loop = run_driven(start_driven, START, FEEDBACK, FINISH, hooks_block=every)
    first, second = loop.iterations.order_by("number")
    seen = [(c["hook"], c["ctx"], c["last_crumb"]) for c in hooks.calls(loop.pk)]
    assert seen == [
        (
            "on_init",
            {"loopId": loop.pk, "pipeline": ["researcher", "drafter"], "maxIterations": 3},
            "loop:start",
        ),
        (
            "on_iteration_start",
            {"loopId": loop.pk, "iteration": 1, "input": "Widget 2.0"},
            "loop:iteration:start",
        ),
        (
            "on_iteration_end",
            {"loopId": loop.pk, "iteration": 1, "output": first.output},
            "loop:iteration:start",
        ),
        (
            "on_iteration_start",
            {
                "loopId": loop.pk,
                "iteration": 2,
                "input": {"previousOutput": first.output, "feedback": "Make it shorter."},
            },
            "loop:iteration:start",
        ),
        (
            "on_iteration_end",
            {"loopId": loop.pk, "iteration": 2, "output": second.output},
            "loop:iteration:start",
        ),
        (
            "on_finish",
            {"loopId": loop.pk, "status": "completed", "iterations": 2},
            "loop:iteration:end",
        ),
    ]
    assert loop.status == "completed"


def test_on_iteration_end_replaces_what_the_host_sees_not_what_is_stored(
    live_worker, start_driven, viewer
):
    run, loop = run_driven(
        start_driven, START, AGAIN, FINISH, hooks_block=hooked(on_iteration_end="replace_output")
    )
    first, second = loop.iterations.order_by("number")
    # The host saw the replacement: it passed straight into iteration 2 and is the result.
    assert "REPLACED 1" in host_answer(run)
    assert second.input == "REPLACED 1"
    assert loop.result == "REPLACED 2"
    # The stored rows and the crumbs keep what the pipeline really said.
    assert first.output.startswith("Demo agent") and first.replaced
    assert first.shown_output == "REPLACED 1"
    ends = [data for name, data in crumbs_on_stream(viewer, run) if name == "loop:iteration:end"]
    assert [e["output"] for e in ends] == [first.output, second.output]


def test_on_error_recover_substitutes_the_output_and_the_loop_goes_on(live_worker, start_driven):
    run, loop = run_driven(
        start_driven,
        START_FLAKY,
        AGAIN,
        FINISH,
        hooks_block=hooked(on_error="recover"),
        flaky=ALWAYS_FAILS,
    )
    first, second = loop.iterations.order_by("number")
    assert (first.status, first.output) == ("recovered", "substitute")
    assert "exited with status 3" in first.error
    assert second.input == "substitute" and second.status == "recovered"
    assert (loop.status, loop.result) == ("completed", "substitute")
    (error_call, *_) = hooks.calls(loop.pk)
    assert error_call["ctx"]["iteration"] == 1 and "flaky" in error_call["ctx"]["error"]


# `errorHandling: {retry: N}` is how the design writes the loop's `retry`.
@pytest.mark.parametrize(
    "retry_spelling",
    ["retry: {}", "errorHandling: {{retry: {}}}"],
    ids=["retry", "errorHandling.retry"],
)
def test_on_error_retry_reruns_just_that_iteration(live_worker, start_driven, retry_spelling):
    every = hooked(on_error="retry", on_iteration_start="on_iteration_start")
    run, loop = run_driven(
        start_driven,
        START_FLAKY,
        FINISH,
        hooks_block=every,
        flaky=FAILS_ONCE,
        retry=1,
        retry_spelling=retry_spelling,
    )
    (it,) = loop.iterations.all()
    assert (it.status, it.attempts, it.output) == ("completed", 2, "fixed")
    attempts = [(s["agent"], s["attempt"]) for s in it.steps]
    assert attempts == [("flaky", 1), ("flaky", 2)]
    statuses = [Iteration.objects.get(pk=s["iteration"]).status for s in it.steps]
    assert statuses == ["failed", "completed"]
    # on_iteration_start is not fired again for the retry.
    assert [c["hook"] for c in hooks.calls(loop.pk)] == ["on_iteration_start", "on_error"]
    assert loop.status == "completed"


def test_retries_are_bounded_by_retry(live_worker, start_driven):
    run, loop = run_driven(
        start_driven,
        START_FLAKY,
        FINISH,
        hooks_block=hooked(on_error="retry"),
        flaky=ALWAYS_FAILS,
        retry=1,
    )
    (it,) = loop.iterations.all()
    assert it.status == "failed" and it.attempts == 2
    assert loop.status == "failed" and "the loop's retry allows 1" in loop.error
    assert [c["hook"] for c in hooks.calls(loop.pk)] == ["on_error", "on_error"]
    answer = host_answer(run)
    assert f"loop {loop.pk} failed and is closed" in answer
    assert "core_finish_loop: refused: no open loop" in answer  # the host read it and went on


@pytest.mark.parametrize("hook", ["give_up", "on_error", None])
def test_on_error_fail_or_no_hook_fails_the_loop(live_worker, start_driven, hook):
    block = hooked(on_error=hook) if hook else "{}"
    run, loop = run_driven(start_driven, START_FLAKY, FINISH, hooks_block=block, flaky=ALWAYS_FAILS)
    assert loop.status == "failed" and "the pipeline failed: flaky" in loop.error
    assert loop.iterations.get().status == LoopIteration.Status.FAILED
    if hook == "give_up":
        assert "not worth another try" in loop.error


def test_a_hook_that_raises_fails_the_loop_with_its_message(live_worker, start_driven, viewer):
    run, loop = run_driven(start_driven, START, FINISH, hooks_block=hooked(on_init="no_budget"))
    assert loop.status == "failed" and loop.iteration_count == 0
    assert (
        "hook on_init (tests.driven.hooks:no_budget) raised ValueError: no budget left"
        in loop.error
    )
    assert "no budget left" in host_answer(run)
    assert crumbs_on_stream(viewer, run)[-1] == (
        "loop:end",
        {"loopId": loop.pk, "status": "failed", "iterations": 0},
    )


def test_an_on_finish_that_raises_fails_the_loop(live_worker, start_driven):
    run, loop = run_driven(
        start_driven, START, FINISH, hooks_block=hooked(on_finish="broken_finish")
    )
    assert loop.status == "failed" and "the report could not be sent" in loop.error
    assert loop.result is None
    assert [c["ctx"]["status"] for c in hooks.calls(loop.pk)] == ["completed"]
    assert "core_finish_loop: refused" in host_answer(run)
