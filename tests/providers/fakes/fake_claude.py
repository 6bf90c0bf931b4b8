#!/usr/bin/env python3
"""A stand-in for `claude -p --output-format stream-json --verbose` (Claude Code print mode).

Reads the prompt on stdin and prints the CLI's stream-json lines: system/init, assistant
(tool_use, then text), user (tool_result), result (session_id, usage, total_cost_usd,
structured_output with --json-schema). `--resume ID` continues a session it created.
With `--mcp-config FILE_OR_JSON` it starts each stdio MCP server as Claude Code does (the
server's `env` over its own environment), initializes it and lists its tools, which it
knows as `mcp__<server>__<tool>`; a call is made only when `--allowedTools` allows it
(`mcp__<server>` or the full name), otherwise the tool_result is Claude's refusal.
Test-only switches (ignored by nothing real, since only tests call this):
  --fake-delay S          pause between streamed messages
  --fake-complete-after N emit the requested completion signal from the Nth call on
  --fake-fail auth|overloaded-once
  --fake-tool-calls FILE  the MCP tools to call, in order: [{"name", "arguments"}]
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    McpClient,
    State,
    emit,
    option,
    pause,
    payload_for,
    prose,
    scripted_tool_calls,
    state_dir,
)


def mcp_servers(argv: list[str]) -> dict[str, McpClient]:
    given = option(argv, "--mcp-config")
    if not given:
        return {}
    text = given if given.lstrip().startswith("{") else Path(given).read_text()
    servers = json.loads(text).get("mcpServers", {})
    return {
        name: McpClient(
            server["command"], server.get("args", []), {**os.environ, **server.get("env", {})}
        )
        for name, server in servers.items()
    }


def allowed(argv: list[str], full_name: str) -> bool:
    rules = (option(argv, "--allowedTools") or "").replace(",", " ").split()
    server = full_name.rsplit("__", 1)[0]
    return full_name in rules or server in rules


def call_tools(argv: list[str], session_id: str, servers: dict, state: State) -> list[str]:
    """Each scripted call as a tool_use block and its tool_result, as Claude streams them."""
    outcomes = []
    for number, call in enumerate(scripted_tool_calls(argv), start=1):
        server = next(
            (n for n, c in servers.items() if any(t["name"] == call["name"] for t in c.tools)), None
        )
        full_name = f"mcp__{server}__{call['name']}" if server else call["name"]
        tool_id = f"toolu_mcp_{number}"
        emit(
            {
                "type": "assistant",
                "session_id": session_id,
                "message": {
                    "id": f"msg_tool_{number}",
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": tool_id,
                            "name": full_name,
                            "input": call.get("arguments") or {},
                        }
                    ],
                },
            }
        )
        if server is None:
            ok, text = False, f"Error: No such tool available: {call['name']}"
        elif not allowed(argv, full_name):
            ok, text = (
                False,
                (
                    f"Claude requested permissions to use {full_name}, but you haven't granted it yet."
                ),
            )
        else:
            ok, text = servers[server].call(call["name"], call.get("arguments") or {})
        emit(
            {
                "type": "user",
                "session_id": session_id,
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": tool_id,
                            "content": [{"type": "text", "text": text}],
                            "is_error": not ok,
                        }
                    ],
                },
            }
        )
        state.log_tool({"tool": full_name, "ok": ok, "result": text})
        outcomes.append(f"{call['name']}: {'ok' if ok else 'refused'}")
    return outcomes


def main(argv: list[str]) -> int:
    if "-p" not in argv or option(argv, "--output-format") != "stream-json":
        print("fake claude: expected -p --output-format stream-json", file=sys.stderr)
        return 2
    if "--verbose" not in argv:
        print("Error: --output-format=stream-json requires --verbose", file=sys.stderr)
        return 1
    prompt = sys.stdin.read()
    delay = float(option(argv, "--fake-delay", "0"))
    after = int(option(argv, "--fake-complete-after", "2"))
    failure = option(argv, "--fake-fail")
    schema_text = option(argv, "--json-schema")
    state = State(state_dir(".fake-claude"))
    resume = option(argv, "--resume")
    if resume:
        session = state.session(resume)
        if session is None:
            print(f"No conversation found with session ID: {resume}", file=sys.stderr)
            return 1
        session_id, turn = resume, session["turns"] + 1
    else:
        session_id, turn = str(uuid.uuid4()), 1
    calls = state.log_call(
        {
            "argv": argv,
            "prompt": prompt,
            "session_id": session_id,
            "resumed": bool(resume),
            "pid": os.getpid(),
        }
    )
    servers = mcp_servers(argv)
    mcp_tools = [f"mcp__{n}__{t['name']}" for n, c in servers.items() for t in c.tools]
    emit(
        {
            "type": "system",
            "subtype": "init",
            "session_id": session_id,
            "model": option(argv, "--model", "fake-sonnet"),
            "cwd": str(Path.cwd()),
            "tools": ["Bash", "Read", *mcp_tools],
            "mcp_servers": [{"name": n, "status": "connected"} for n in servers],
        }
    )

    if failure == "auth" or (failure == "overloaded-once" and calls == 1):
        message = (
            "Invalid API key · Please run /login"
            if failure == "auth"
            else 'API Error: 529 {"type":"overloaded_error","message":"Overloaded"}'
        )
        emit(
            {
                "type": "result",
                "subtype": "success",
                "is_error": True,
                "result": message,
                "session_id": session_id,
                "total_cost_usd": 0,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            }
        )
        return 1

    emit(
        {
            "type": "assistant",
            "session_id": session_id,
            "message": {
                "id": "msg_1",
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "Bash",
                        "input": {"command": "ls -la", "description": "List files"},
                    }
                ],
            },
        }
    )
    emit(
        {
            "type": "user",
            "session_id": session_id,
            "message": {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "total 0"}
                ],
            },
        }
    )
    outcomes = call_tools(argv, session_id, servers, state)
    for client in servers.values():
        client.close()
    pieces = prose("Fake Claude", turn, session_id, prompt, calls, after)
    if outcomes:
        pieces = [f"Tool calls: {'; '.join(outcomes)}. ", *pieces]
    if schema_text:
        structured = payload_for(json.loads(schema_text), calls >= after)
        pieces = [json.dumps(structured)]
    for piece in pieces:
        pause(delay)
        emit(
            {
                "type": "assistant",
                "session_id": session_id,
                "message": {
                    "id": f"msg_{uuid.uuid4().hex[:6]}",
                    "role": "assistant",
                    "content": [{"type": "text", "text": piece}],
                },
            }
        )
    state.save_session(session_id, {"turns": turn})
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "duration_ms": 10,
        "num_turns": 2,
        "result": "".join(pieces),
        "session_id": session_id,
        "total_cost_usd": 0.0123,
        "usage": {
            "input_tokens": len(prompt.split()),
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 0,
            "output_tokens": 42,
        },
    }
    if schema_text:
        result["structured_output"] = structured
    emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
