"""Every provider honours `AgentRequest.tools`: the same ToolBox is called through each
agent's own protocol, against fakes that speak it (streamed OpenAI `tool_calls`, Anthropic
`tool_use` blocks, Claude Code's and Codex's MCP clients, a command's shell, the demo).

The providers are called here directly, as the executor calls them; what they return (the
conversation, the tool calls) is what the executor records."""

from __future__ import annotations

import json
import time

import pytest

from runs.agent_tools import AgentTool, ToolBox, ToolContext, ToolError
from runs.providers.base import AgentRequest, ProviderError
from runs.providers.registry import build
from tests.providers.conftest import FAKE_CLAUDE, FAKE_CODEX

SEEN: list[dict] = []


def _echo(ctx, args):
    SEEN.append(args)
    return {"echo": args["text"], "run": ctx.run_id}


def _refuse(ctx, args):
    raise ToolError("no open loop: call core_start_loop first")


def _slow(ctx, args):
    time.sleep(args["seconds"])
    return "slept"


ECHO = AgentTool(
    "echo",
    "Say the text back",
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    _echo,
)
REFUSE = AgentTool("refuse", "Always refuses", {"type": "object", "properties": {}}, _refuse)
SLOW = AgentTool(
    "slow",
    "Takes its time and prints nothing",
    {"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]},
    _slow,
)


@pytest.fixture
def box():
    SEEN.clear()
    return ToolBox(ToolContext(run_id=41, node_id="host", role="host"), [ECHO, REFUSE, SLOW])


def request(tmp_path, box, **extra) -> AgentRequest:
    return AgentRequest(prompt="Use your tools.", workdir=str(tmp_path), tools=box, **extra)


def script(tmp_path, calls: list[dict]) -> str:
    path = tmp_path / "tool-calls.json"
    path.write_text(json.dumps(calls))
    return str(path)


CALLS = [{"name": "echo", "arguments": {"text": "over the wire"}}, {"name": "refuse"}]


# --- OpenAI-compatible ---------------------------------------------------------------------


def test_openai_assembles_streamed_tool_calls_and_sends_the_results_back(fake_ai, box, tmp_path):
    fake_ai.answers = [
        {"text": "Let me check. ", "tool_calls": [CALLS[0], {"name": "refuse", "arguments": {}}]},
        "Checked: it echoed.",
    ]
    provider = build(
        "ai",
        "openai",
        {"base_url": fake_ai.url + "/v1", "model": "m", "api_key_env": "FAKE_PROVIDER_KEY"},
    )
    chunks: list[str] = []
    result = provider.run(request(tmp_path, box), chunks.append)

    assert result.text == "Checked: it echoed."
    assert SEEN == [{"text": "over the wire"}]
    first, second = fake_ai.requests
    offered = first["body"]["tools"]
    assert [t["function"]["name"] for t in offered] == ["echo", "refuse", "slow"]
    assert offered[0]["type"] == "function" and offered[0]["function"]["parameters"]["required"]
    assistant, echoed, refused = second["body"]["messages"][1:]
    assert assistant["role"] == "assistant" and assistant["content"] == "Let me check. "
    calls = assistant["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["echo", "refuse"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"text": "over the wire"}
    assert echoed == {
        "role": "tool",
        "tool_call_id": calls[0]["id"],
        "content": json.dumps({"echo": "over the wire", "run": 41}),
    }
    assert refused["tool_call_id"] == calls[1]["id"]
    assert refused["content"] == "no open loop: call core_start_loop first"
    # Returned for the executor to record, never written by the provider:
    assert [(c["tool"], c["ok"]) for c in result.tool_calls] == [("echo", True), ("refuse", False)]
    assert result.conversation[-1] == {"role": "assistant", "content": "Checked: it echoed."}
    assert [m["role"] for m in result.conversation] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert result.tokens_out and result.tokens_in
    assert '[echo] {"text": "over the wire"}' in "".join(chunks)


def test_openai_stops_a_model_that_never_stops_calling_tools(fake_ai, box, tmp_path):
    fake_ai.answers = [{"tool_calls": [CALLS[0]]}] * 3
    provider = build(
        "ai",
        "openai",
        {
            "base_url": fake_ai.url + "/v1",
            "model": "m",
            "api_key_env": "FAKE_PROVIDER_KEY",
            "max_tool_rounds": 2,
        },
    )
    with pytest.raises(ProviderError, match="still calling tools after 2 rounds"):
        provider.run(request(tmp_path, box), lambda chunk: None)
    assert len(fake_ai.requests) == 3 and len(SEEN) == 2


def test_openai_without_tools_sends_none(fake_ai, tmp_path):
    provider = build(
        "ai",
        "openai",
        {"base_url": fake_ai.url + "/v1", "model": "m", "api_key_env": "FAKE_PROVIDER_KEY"},
    )
    provider.run(AgentRequest(prompt="hi", workdir=str(tmp_path)), lambda chunk: None)
    assert "tools" not in fake_ai.requests[0]["body"]


# --- Anthropic -----------------------------------------------------------------------------


def test_anthropic_streams_tool_use_blocks_and_answers_with_tool_results(fake_ai, box, tmp_path):
    fake_ai.answers = [
        {"text": "Checking.", "tool_calls": [CALLS[0], {"name": "refuse", "arguments": {}}]},
        {"tool_calls": [{"name": "echo", "arguments": {"text": "again"}}]},
        "Done with tools.",
    ]
    provider = build(
        "claude-api",
        "anthropic",
        {"base_url": fake_ai.url, "model": "m", "api_key_env": "FAKE_PROVIDER_KEY"},
    )
    result = provider.run(request(tmp_path, box), lambda chunk: None)

    assert result.text == "Done with tools."
    assert SEEN == [{"text": "over the wire"}, {"text": "again"}]
    first, second, third = fake_ai.requests
    assert [t["name"] for t in first["body"]["tools"]] == ["echo", "refuse", "slow"]
    assert first["body"]["tools"][0]["input_schema"]["required"] == ["text"]
    assistant, results = second["body"]["messages"][1:]
    assert assistant["content"][0] == {"type": "text", "text": "Checking."}
    uses = [b for b in assistant["content"] if b["type"] == "tool_use"]
    assert [(u["name"], u["input"]) for u in uses] == [
        ("echo", {"text": "over the wire"}),
        ("refuse", {}),
    ]
    assert results["role"] == "user"
    ok, refused = results["content"]
    assert ok["type"] == "tool_result" and ok["tool_use_id"] == uses[0]["id"]
    assert (
        json.loads(ok["content"]) == {"echo": "over the wire", "run": 41} and "is_error" not in ok
    )
    assert refused["is_error"] is True and refused["tool_use_id"] == uses[1]["id"]
    # A round with no text sends no empty text block (the API refuses those).
    assert [b["type"] for b in third["body"]["messages"][3]["content"]] == ["tool_use"]
    assert [c["tool"] for c in result.tool_calls] == ["echo", "refuse", "echo"]
    assert result.conversation[-1] == {"role": "assistant", "content": "Done with tools."}


# --- Claude Code and Codex, over MCP -------------------------------------------------------


def tool_log(tmp_path, folder: str) -> list[dict]:
    path = tmp_path / folder / "tools.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_claude_code_reaches_the_tools_over_its_mcp_config(box, tmp_path):
    calls = script(tmp_path, CALLS)
    provider = build("cc", "claude", {"command": f"{FAKE_CLAUDE} --fake-tool-calls {calls}"})
    result = provider.run(request(tmp_path, box), lambda chunk: None)

    logged = tool_log(tmp_path, ".fake-claude")
    assert [(t["tool"], t["ok"]) for t in logged] == [
        ("mcp__loop__echo", True),
        ("mcp__loop__refuse", False),
    ]
    assert json.loads(logged[0]["result"]) == {"echo": "over the wire", "run": 41}
    assert logged[1]["result"] == "no open loop: call core_start_loop first"
    # Its own Bash first, then the console's tools by their own names.
    assert [c["tool"] for c in result.tool_calls] == ["Bash", "echo", "refuse"]
    argv = json.loads((tmp_path / ".fake-claude" / "calls.jsonl").read_text())["argv"]
    assert argv[argv.index("--allowedTools") + 1] == "mcp__loop"
    # The config is a file in the call's private folder, gone with it: no token in argv.
    config = argv[argv.index("--mcp-config") + 1]
    assert config.endswith("mcp.json") and not (tmp_path / config).exists()
    assert "LOOP_TOOL_TOKEN" not in " ".join(argv)


def test_codex_reaches_the_tools_through_env_vars_it_forwards(box, tmp_path):
    calls = script(tmp_path, CALLS)
    provider = build("cx", "codex", {"command": f"{FAKE_CODEX} --fake-tool-calls {calls}"})
    result = provider.run(request(tmp_path, box), lambda chunk: None)

    logged = tool_log(tmp_path, ".fake-codex")
    assert [(t["tool"], t["server"], t["ok"]) for t in logged] == [
        ("echo", "loop", True),
        ("refuse", "loop", False),
    ]
    assert [c["tool"] for c in result.tool_calls] == ["command", "echo", "refuse"]
    argv = json.loads((tmp_path / ".fake-codex" / "calls.jsonl").read_text())["argv"]
    overrides = [argv[i + 1] for i, word in enumerate(argv) if word == "-c"]
    assert any(o.startswith("mcp_servers.loop.command=") for o in overrides)
    forwarded = next(o for o in overrides if o.startswith("mcp_servers.loop.env_vars="))
    # By name: the token's file, which only the call's sandbox sees, stays off the command line.
    assert "LOOP_TOOL_TOKEN_FILE" in forwarded
    assert box.tools and all(len(word) < 2000 for word in argv)


# --- a command's shell, and the demo agent -------------------------------------------------


def test_a_command_agent_calls_tools_from_its_shell(box, tmp_path):
    # `$LOOP_TOOL_CMD NAME ...`: the console's checkout (and its manage.py) is not in the
    # agent's sandbox; the relay is.
    command = (
        '$LOOP_TOOL_CMD echo --text "from $LOOP_ROLE in run $LOOP_RUN_ID"; '
        '$LOOP_TOOL_CMD refuse || echo "refused: $?"'
    )
    provider = build("sh", "command", {"command": command})
    result = provider.run(request(tmp_path, box), lambda chunk: None)
    assert json.loads(result.text.splitlines()[0]) == {"echo": "from host in run 41", "run": 41}
    assert "no open loop" in result.text and "refused: 1" in result.text
    assert [(c["tool"], c["ok"]) for c in result.tool_calls] == [("echo", True), ("refuse", False)]


def test_a_silent_agent_waiting_on_a_tool_is_not_idle(box, tmp_path):
    provider = build("sh", "command", {"command": "$LOOP_TOOL_CMD slow --seconds 4 && echo back"})
    result = provider.run(request(tmp_path, box, idle_timeout=1.5), lambda chunk: None)
    assert not result.timed_out
    assert result.text.split() == ["slept", "back"]


def test_the_demo_agent_makes_its_scripted_calls(box, tmp_path):
    provider = build("d", "demo", {"delay": 0, "tool_calls": CALLS})
    result = provider.run(request(tmp_path, box), lambda chunk: None)
    assert SEEN == [{"text": "over the wire"}]
    assert "echo: done" in result.text and "refuse: refused: no open loop" in result.text
    assert [(c["tool"], c["ok"]) for c in result.tool_calls] == [("echo", True), ("refuse", False)]
