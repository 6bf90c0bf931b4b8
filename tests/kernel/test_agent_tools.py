"""Agent tools: one ToolBox reached in-process, through the tools relay and over MCP.

The relay and MCP clients run as real child processes started the way an agent is (in its
sandbox, with the environment an agent gets: no DATABASE_URL, no settings): they reach the
worker only through the call's socket, which answers nobody else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runs.agent_tools import AgentTool, ToolBox, ToolContext, ToolError
from runs.agent_tools import serve as serve_module
from runs.agent_tools.serve import RELAY, serving
from runs.sandbox import child_env
from tests.agent_process import call_space, relay

SEEN: list[tuple[ToolContext, dict]] = []
RELAY_FILE = Path(serve_module.__file__).parent / "relay" / RELAY


def _echo(ctx, args):
    SEEN.append((ctx, args))
    return {"echo": args.get("text", ""), "count": args.get("count"), "run": ctx.run_id}


def _refuse(ctx, args):
    raise ToolError("no open loop: call core_start_loop first")


def _count_runs(ctx, args):
    from runs.models import Run

    return {"runs": Run.objects.count()}


ECHO = AgentTool(
    "echo",
    "Say it back",
    {
        "type": "object",
        "properties": {"text": {"type": "string"}, "count": {"type": "integer"}},
        "required": ["text"],
        "additionalProperties": False,
    },
    _echo,
)
REFUSE = AgentTool("refuse", "Always refuses", {"type": "object", "properties": {}}, _refuse)
COUNT = AgentTool("count_runs", "Count runs", {"type": "object", "properties": {}}, _count_runs)


@pytest.fixture
def box():
    SEEN.clear()
    return ToolBox(ToolContext(run_id=7, node_id="host", role="fixer"), [ECHO, REFUSE, COUNT])


@pytest.fixture
def space(tmp_path):
    with call_space(tmp_path) as made:
        yield made


agent = relay


def test_in_process_calls_validate_arguments_and_return_errors_as_text(box):
    ok = box.call("echo", '{"text": "hi", "count": 2}')
    assert ok.ok and json.loads(ok.content) == {"echo": "hi", "count": 2, "run": 7}
    bad = box.call("echo", {"count": "two"})
    assert not bad.ok and "'text' is a required property" in bad.content
    assert "is not of type 'integer'" in bad.content
    refused = box.call("refuse", {})
    assert refused == type(refused)(False, "no open loop: call core_start_loop first")
    unknown = box.call("nope", {})
    assert not unknown.ok and "echo, refuse, count_runs" in unknown.content


def test_a_cli_agent_calls_a_tool_through_the_worker_socket(box, space, tmp_path):
    note = tmp_path / "note.txt"
    note.write_text("from a file")
    with serving(box, space) as env:
        assert "DATABASE_URL" not in child_env(env)
        assert "LOOP_TOOL_TOKEN" not in env  # the token is a file only the call's sandbox sees
        done = agent(space, env, "tool", "echo", "--text", "a $(b) `c`", "--count", "3")
        from_file = agent(space, env, "tool", "echo", "--text-file", str(note))
        refused = agent(space, env, "tool", "refuse")
        typo = agent(space, env, "tool", "echo", "--txt", "x")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"echo": "a $(b) `c`", "count": 3, "run": 7}
    assert json.loads(from_file.stdout)["echo"] == "from a file"
    assert SEEN[0][0].role == "fixer"
    assert refused.returncode == 1 and "no open loop" in refused.stdout
    assert typo.returncode == 2 and "unknown argument --txt" in typo.stderr
    assert "--text, --count" in typo.stderr


def test_the_socket_refuses_a_wrong_token_and_closes_with_the_call(box, space, tmp_path):
    guess = tmp_path / "guess"
    guess.write_text("guess")
    with serving(box, space) as env:
        forged = agent(space, {**env, "LOOP_TOOL_TOKEN_FILE": str(guess)}, "tool", "echo")
        path = os.path.join(space.folder, "s")
    assert forged.returncode == 2 and "wrong or missing token" in forged.stderr
    assert SEEN == []
    after = agent(space, {**env}, "tool", "echo", "--text", "x")
    assert after.returncode == 2 and "cannot reach the console's tools" in after.stderr
    assert not os.path.exists(path)


def test_a_process_the_call_did_not_start_is_refused_even_with_the_token(box, space):
    """The channel belongs to the agent's process tree (SO_PEERCRED): another run's agent
    that found the socket and read the token still gets nothing."""
    with serving(box, space) as env:
        agent(space, env, "tool", "--list")  # the call's own process started first
        outsider = subprocess.run(
            [sys.executable, str(RELAY_FILE), "tool", "echo", "--text", "stolen"],
            env={
                **child_env(env),
                "LOOP_TOOL_SOCKET": os.path.join(space.folder, "s"),
                "LOOP_TOOL_TOKEN_FILE": os.path.join(space.folder, "token"),
            },
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert outsider.returncode == 2, outsider.stdout
    assert "this channel belongs to another agent" in outsider.stderr
    assert SEEN == []


@pytest.mark.django_db(transaction=True)
def test_a_tool_reads_the_database_from_the_socket_thread(box, space):
    with serving(box, space) as env:
        done = agent(space, env, "tool", "count_runs")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"runs": 0}


def test_an_mcp_client_lists_and_calls_the_same_tools(box, space):
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "over mcp"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "refuse", "arguments": {}},
        },
        {"jsonrpc": "2.0", "id": 5, "method": "resources/list"},
    ]
    with serving(box, space) as env:
        done = agent(space, env, "mcp", stdin="".join(json.dumps(m) + "\n" for m in messages))
    assert done.returncode == 0, done.stderr
    answers = {a["id"]: a for a in map(json.loads, done.stdout.splitlines())}
    assert sorted(answers) == [1, 2, 3, 4, 5]  # no answer to the notification
    assert answers[1]["result"]["protocolVersion"] == "2025-06-18"
    assert answers[1]["result"]["capabilities"] == {"tools": {"listChanged": False}}
    listed = {t["name"]: t for t in answers[2]["result"]["tools"]}
    assert listed["echo"]["inputSchema"]["required"] == ["text"]
    call = answers[3]["result"]
    assert call["isError"] is False
    assert json.loads(call["content"][0]["text"])["echo"] == "over mcp"
    assert answers[4]["result"]["isError"] is True
    assert answers[5]["error"]["code"] == -32601


@pytest.mark.django_db
def test_loop_tool_outside_an_agent_says_why(capsys):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="LOOP_TOOL_SOCKET is not set"):
        call_command("loop", "tool", "echo")
