"""The real Claude Code CLI driven by a worker, in its sandbox, through the key proxy, against
the scripted Anthropic Messages API (streamed, with tool use)."""

from __future__ import annotations

import threading

import pytest

from loops.stepmachine.models import Handoff
from runs.actor import Actor
from runs.models import Iteration, RunEvent
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
    two_steps,
)
from tests.stepmachine.conftest import settled


@pytest.fixture
def claude(scripted_api, db):
    return provider(
        "real-claude",
        "claude",
        cli("claude"),
        "claude-sonnet-4-5",
        {
            "ANTHROPIC_API_KEY": SCRIPTED_KEY,
            "ANTHROPIC_BASE_URL": scripted_api.url,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
        },
    )


def test_a_loop_resumes_its_session_to_the_signal(live_worker, start, claude, scripted_api):
    scripted_api.plan = two_steps
    run = wait_run(start(loop_recipe(claude.name)), timeout=240)
    assert run.status == "completed", run.error
    first, second = iterations(run)
    assert "Step one is done" in first.raw_output and "COMPLETE" in second.raw_output
    # `--resume`: the second call carries the first turn, under the same session.
    assert first.session_id and second.session_id == first.session_id
    assert [len(t.prompts) for t in scripted_api.turns if t.vendor == "anthropic"][-1] == 2
    assert first.tokens_in >= 120 and first.tokens_out == 30
    assert first.cost_usd and first.cost_usd > 0  # Claude Code's own figure
    # The CLI held a stand-in: the real key was put back by the worker's proxy.
    assert scripted_api.keys_seen() == {SCRIPTED_KEY}


def test_its_own_tools_and_its_words_show_while_it_works(live_worker, start, claude, scripted_api):
    go = threading.Event()

    def plan(turn):
        if not turn.tools:  # a call of the CLI's own
            return Reply(text="ok")
        if not turn.results:
            command = {"command": "ls", "description": "List the folder"}
            return Reply(text="Listing the folder first.", tool="Bash", arguments=command)
        return Reply(text="Listed it. COMPLETE", hold=go)

    scripted_api.plan = plan
    run = start(loop_recipe(claude.name))
    # Said before its tool ran, seen while the next answer is held back.
    seen_streaming(run, "Listing the folder first.", timeout=120)
    go.set()
    wait_run(run, timeout=240)
    assert run.status == "completed", run.error
    (only,) = iterations(run)
    assert "Listed it. COMPLETE" in only.raw_output
    tools = RunEvent.objects.filter(run=run, kind="agent_tool")
    assert [(e.data["tool"], e.data["detail"]) for e in tools] == [("Bash", "ls")]


def test_a_role_records_its_handoff_through_the_mcp_tool(
    live_worker, claude, scripted_api, make_recipe, operator
):
    scripted_api.plan = hand_off
    run = start_run(
        make_recipe(handoff_recipe(claude.name), slug="real-cli-handoff"),
        actor=Actor.operator(operator, "console"),
    )
    settled(run, "approved", timeout=240)
    handoff = Handoff.objects.get(run=run)
    assert (handoff.role, handoff.surface) == ("maker", "agent")
    assert handoff.summary == "made by the real anthropic CLI"
    offered = [name for turn in scripted_api.turns for name in turn.tools]
    assert "mcp__loop__record_handoff" in offered


def test_an_api_error_fails_the_iteration_with_claudes_message(
    live_worker, start, claude, scripted_api
):
    scripted_api.plan = lambda turn: Reply(error=400, text="scripted refusal: prompt too long")
    run = wait_run(start(loop_recipe(claude.name)), timeout=240)
    assert run.status == "failed"
    assert "scripted refusal: prompt too long" in node(run).error
    assert Iteration.objects.get(run=run).status == "failed"


def test_cancel_kills_the_cli_process_tree(live_worker, start, claude, scripted_api):
    scripted_api.plan = lambda turn: Reply(text="Thinking it over", hang=True)
    run = start(loop_recipe(claude.name))
    cancel_and_wait_gone(run, scripted_api)
    wait_run(run, "cancelled")
