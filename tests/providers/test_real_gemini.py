"""The real Gemini CLI driven by a worker, in its sandbox, through the key proxy, against
the scripted Gemini streamGenerateContent API (with function calls)."""

from __future__ import annotations

import pytest

from loops.stepmachine.models import Handoff
from runs.actor import Actor
from runs.models import Iteration
from runs.services import start_run
from tests.conftest import wait_run
from tests.providers.conftest import iterations, node, seen_streaming
from tests.providers.fakes.scripted_api import Reply
from tests.providers.real_clis import (
    SCRIPTED_KEY,
    cancel_and_wait_gone,
    cli,
    hand_off,
    handoff_recipe,
    loop_recipe,
    provider,
    steps,
    two_steps,
)
from tests.stepmachine.conftest import settled


@pytest.fixture
def gemini(scripted_api, db):
    return provider(
        "real-gemini",
        "gemini",
        cli("gemini"),
        "gemini-2.5-pro",
        {"GEMINI_API_KEY": SCRIPTED_KEY, "GOOGLE_GEMINI_BASE_URL": scripted_api.url},
    )


def test_a_loop_resumes_its_session_to_the_signal(live_worker, start, gemini, scripted_api):
    scripted_api.plan = two_steps
    run = wait_run(start(loop_recipe(gemini.name)), timeout=240)
    assert run.status == "completed", run.error
    first, second = iterations(run)
    assert "Step one is done" in first.raw_output and "COMPLETE" in second.raw_output
    # `--resume`: the second call carries the first turn, under the same session.
    assert first.session_id and second.session_id == first.session_id
    assert max(steps(t) for t in scripted_api.turns) == 2
    assert first.tokens_in >= 120 and first.tokens_out == 30
    # The CLI held a stand-in: the real key was put back by the worker's proxy.
    assert scripted_api.keys_seen() == {SCRIPTED_KEY}


def test_a_role_records_its_handoff_through_the_mcp_tool(
    live_worker, gemini, scripted_api, make_recipe, operator
):
    scripted_api.plan = hand_off
    run = start_run(
        make_recipe(handoff_recipe(gemini.name), slug="real-cli-handoff"),
        actor=Actor.operator(operator, "console"),
    )
    settled(run, "approved", timeout=240)
    handoff = Handoff.objects.get(run=run)
    assert (handoff.role, handoff.surface) == ("maker", "agent")
    assert handoff.summary == "made by the real gemini CLI"
    offered = [name for turn in scripted_api.turns for name in turn.tools]
    assert any(name.endswith("record_handoff") for name in offered)


def test_an_api_error_fails_the_iteration_with_geminis_message(
    live_worker, start, gemini, scripted_api
):
    scripted_api.plan = lambda turn: Reply(error=400, text="scripted refusal: prompt too long")
    run = wait_run(start(loop_recipe(gemini.name)), timeout=240)
    assert run.status == "failed"
    assert "scripted refusal: prompt too long" in node(run).error
    assert Iteration.objects.get(run=run).status == "failed"


def test_output_streams_live_and_cancel_kills_the_cli_process_tree(
    live_worker, start, gemini, scripted_api
):
    scripted_api.plan = lambda turn: Reply(text="Thinking it over", hang=True)
    run = start(loop_recipe(gemini.name))
    # Gemini CLI prints the answer's pieces as they come: seen while the answer is held open.
    seen_streaming(run, "Thinking it over", timeout=120)
    cancel_and_wait_gone(run, scripted_api)
    wait_run(run, "cancelled")
    assert "Thinking it over" in Iteration.objects.get(run=run).output
