#!/usr/bin/env python3
"""A stand-in for `codex exec --json` (and `codex exec --json ... resume <thread id>`).

Reads the prompt on stdin and prints the JSONL events: thread.started, turn.started,
item.started / item.completed (command_execution, agent_message), turn.completed with
usage. With `--output-schema FILE` the last agent message is JSON that fits the schema.
MCP servers come from `-c mcp_servers.<name>.<key>=<TOML value>` overrides (command, args,
env, env_vars); like Codex, it starts each with a cleared environment: a few basics
(HOME, PATH, ...), the variables `env_vars` names, and `env`. Its calls are
`mcp_tool_call` items.
Test-only switches: --fake-delay S, --fake-complete-after N, --fake-fail auth,
--fake-tool-calls FILE (the MCP tools to call, in order).
"""

from __future__ import annotations

import json
import os
import sys
import tomllib
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

# What Codex passes an MCP server of its own environment, before env_vars and env.
DEFAULT_MCP_ENV = (
    "HOME",
    "LOGNAME",
    "PATH",
    "SHELL",
    "USER",
    "LANG",
    "LC_ALL",
    "TERM",
    "TMPDIR",
    "TZ",
)


def mcp_servers(argv: list[str]) -> dict[str, McpClient]:
    declared: dict[str, dict] = {}
    for index, word in enumerate(argv):
        if word != "-c" or index + 1 >= len(argv):
            continue
        key, _, value = argv[index + 1].partition("=")
        parts = key.split(".")
        if len(parts) == 3 and parts[0] == "mcp_servers":
            declared.setdefault(parts[1], {})[parts[2]] = tomllib.loads(f"v = {value}")["v"]
    clients = {}
    for name, server in declared.items():
        names = [*DEFAULT_MCP_ENV, *server.get("env_vars", [])]
        env = {k: os.environ[k] for k in names if k in os.environ}
        clients[name] = McpClient(
            server["command"], server.get("args", []), {**env, **server.get("env", {})}
        )
    return clients


def call_tools(argv: list[str], servers: dict, state: State) -> list[str]:
    outcomes = []
    for number, call in enumerate(scripted_tool_calls(argv), start=1):
        server = next(
            (n for n, c in servers.items() if any(t["name"] == call["name"] for t in c.tools)),
            None,
        )
        item = {
            "id": f"item_mcp_{number}",
            "type": "mcp_tool_call",
            "server": server or "",
            "tool": call["name"],
            "arguments": call.get("arguments") or {},
            "status": "in_progress",
        }
        emit({"type": "item.started", "item": item})
        if server is None:
            ok, text = False, f"unknown MCP tool {call['name']}"
        else:
            ok, text = servers[server].call(call["name"], call.get("arguments") or {})
        done = {
            **item,
            "status": "completed" if ok else "failed",
            "result": {"content": [{"type": "text", "text": text}]},
            "error": None if ok else {"message": text},
        }
        emit({"type": "item.completed", "item": done})
        state.log_tool({"tool": call["name"], "server": server, "ok": ok, "result": text})
        outcomes.append(f"{call['name']}: {'ok' if ok else 'refused'}")
    return outcomes


def main(argv: list[str]) -> int:
    if "exec" not in argv or "--json" not in argv:
        print("fake codex: expected `exec --json`", file=sys.stderr)
        return 2
    prompt = sys.stdin.read()
    delay = float(option(argv, "--fake-delay", "0"))
    after = int(option(argv, "--fake-complete-after", "2"))
    schema_path = option(argv, "--output-schema")
    state = State(state_dir(".fake-codex"))
    resume = option(argv, "resume")
    if resume:
        session = state.session(resume)
        if session is None:
            emit({"type": "error", "message": f"no rollout found for thread id {resume}"})
            return 1
        thread_id, turn = resume, session["turns"] + 1
    else:
        thread_id, turn = str(uuid.uuid4()), 1
    schema = json.loads(Path(schema_path).read_text()) if schema_path else None
    calls = state.log_call(
        {
            "argv": argv,
            "prompt": prompt,
            "thread_id": thread_id,
            "resumed": bool(resume),
            "schema": schema,
        }
    )
    emit({"type": "thread.started", "thread_id": thread_id})
    emit({"type": "turn.started"})
    if option(argv, "--fake-fail") == "auth":
        emit(
            {
                "type": "error",
                "message": "unexpected status 401 Unauthorized: Missing bearer authentication",
            }
        )
        emit(
            {
                "type": "turn.failed",
                "error": {
                    "message": "unexpected status 401 Unauthorized: Missing bearer authentication"
                },
            }
        )
        return 1
    emit(
        {
            "type": "item.started",
            "item": {
                "id": "item_0",
                "type": "command_execution",
                "command": "bash -lc ls",
                "aggregated_output": "",
                "status": "in_progress",
            },
        }
    )
    emit(
        {
            "type": "item.completed",
            "item": {
                "id": "item_0",
                "type": "command_execution",
                "command": "bash -lc ls",
                "aggregated_output": "README.md\n",
                "exit_code": 0,
                "status": "completed",
            },
        }
    )
    servers = mcp_servers(argv)
    outcomes = call_tools(argv, servers, state)
    for client in servers.values():
        client.close()
    pieces = prose("Fake Codex", turn, thread_id, prompt, calls, after)
    if outcomes:
        pieces = [f"Tool calls: {'; '.join(outcomes)}. ", *pieces]
    if schema is not None:
        pieces = pieces[:1] + [json.dumps(payload_for(schema, calls >= after))]
    for number, piece in enumerate(pieces, start=1):
        pause(delay)
        emit(
            {
                "type": "item.completed",
                "item": {"id": f"item_{number}", "type": "agent_message", "text": piece},
            }
        )
    state.save_session(thread_id, {"turns": turn})
    emit(
        {
            "type": "turn.completed",
            "usage": {
                "input_tokens": len(prompt.split()),
                "cached_input_tokens": 0,
                "output_tokens": 17,
            },
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
