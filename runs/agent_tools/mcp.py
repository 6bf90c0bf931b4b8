"""`manage.py loop mcp`: a Model Context Protocol server on stdin/stdout for CLI agents
that speak MCP (Claude Code, Codex). It lists and calls the tools of the agent's call by
forwarding to the worker's socket (see client.py): newline-delimited JSON-RPC 2.0.

Standard library only, like client.py.
"""

from __future__ import annotations

import json
import sys

from . import client

SUPPORTED_VERSIONS = ("2025-06-18", "2025-03-26", "2024-11-05")
SERVER_INFO = {"name": "loop-console", "version": "1"}


def _tools() -> list[dict]:
    return [
        {"name": t["name"], "description": t["description"], "inputSchema": t["parameters"]}
        for t in client.list_tools()
    ]


def handle(message: dict) -> dict | None:
    """One JSON-RPC message in, its response out (None for a notification)."""
    method = message.get("method")
    msg_id = message.get("id")
    params = message.get("params") or {}
    if msg_id is None:
        return None  # notifications (initialized, cancelled, ...) need no answer
    try:
        if method == "initialize":
            asked = params.get("protocolVersion")
            result = {
                "protocolVersion": asked if asked in SUPPORTED_VERSIONS else SUPPORTED_VERSIONS[0],
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": SERVER_INFO,
            }
        elif method == "ping":
            result = {}
        elif method == "tools/list":
            result = {"tools": _tools()}
        elif method == "tools/call":
            ok, content = client.call(str(params.get("name", "")), params.get("arguments") or {})
            result = {"content": [{"type": "text", "text": content}], "isError": not ok}
        else:
            return _error(msg_id, -32601, f"method not found: {method}")
    except client.ToolClientError as exc:
        return _error(msg_id, -32603, str(exc))
    return {"jsonrpc": "2.0", "id": msg_id, "result": result}


def _error(msg_id, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


def serve_stdio(stdin=None, stdout=None) -> None:
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    for line in stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            answer = _error(None, -32700, "parse error")
        else:
            answer = (
                handle(message)
                if isinstance(message, dict)
                else _error(None, -32600, "batches are not supported")
            )
        if answer is not None:
            stdout.write(json.dumps(answer, ensure_ascii=False) + "\n")
            stdout.flush()
