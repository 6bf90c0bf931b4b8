"""The agent's side of the console's tools, in the agent's own process (in its sandbox):

    loop_tools.py tool NAME --arg value ...      call one tool
    loop_tools.py tool --list                    list this call's tools
    loop_tools.py handoff RUN_ID --role R --status S [--summary T] [--data-file F]
    loop_tools.py mcp                            an MCP server on stdin/stdout

Each forwards to the worker's unix socket (LOOP_TOOL_SOCKET) with the call's token, read
from the file LOOP_TOOL_TOKEN_FILE names (never from the environment). The worker also
checks that the caller descends from the agent it started (runs/agent_tools/serve.py).

Standard library only, one file, no Django and no import of the console: the sandbox
shows the agent this folder (at /run/loop-tools) and nothing else of the console. The
agent finds the commands in LOOP_TOOL_CMD, LOOP_HANDOFF_CMD and LOOP_MCP_CMD; outside a
sandbox `manage.py loop tool|handoff|mcp` hands over to `main` here.
"""

from __future__ import annotations

import json
import os
import socket
import sys

# `loop <alias> [RUN_ID] --field value ...` calls the tool it names.
ALIASES = {"handoff": "record_handoff"}
SUBCOMMANDS = {"tool", "mcp", *ALIASES}


class ToolClientError(Exception):
    pass


def request(payload: dict) -> dict:
    path = os.environ.get("LOOP_TOOL_SOCKET")
    if not path:
        raise ToolClientError("LOOP_TOOL_SOCKET is not set: tools work from an agent's process")
    payload = {**payload, "token": _token()}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(path)
            sock.sendall((json.dumps(payload) + "\n").encode())
            with sock.makefile("rb") as answer:
                line = answer.readline()
    except OSError as exc:
        raise ToolClientError(f"cannot reach the console's tools ({exc.strerror or exc})") from None
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        raise ToolClientError("the console's tool server gave no answer") from None


def _token() -> str:
    path = os.environ.get("LOOP_TOOL_TOKEN_FILE")
    if not path:
        return ""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError as exc:
        raise ToolClientError(f"cannot read the call's token ({exc.strerror or exc})") from None


def list_tools() -> list[dict]:
    answer = request({"op": "list"})
    if not answer.get("ok"):
        raise ToolClientError(answer.get("content", "refused"))
    return answer["tools"]


def call(name: str, arguments: dict) -> tuple[bool, str]:
    answer = request({"op": "call", "name": name, "arguments": arguments})
    return bool(answer.get("ok")), str(answer.get("content", ""))


def parse_flags(words: list[str], parameters: dict) -> dict:
    """`--some-field value` → {"some_field": value}; `--field-file PATH` reads the value from a
    file. A value for a non-string parameter is read as JSON (`--count 3`, `--data '{..}'`)."""
    props = parameters.get("properties", {})
    args: dict = {}
    i = 0
    while i < len(words):
        word = words[i]
        if not word.startswith("--"):
            raise ToolClientError(f"unexpected argument {word!r} (arguments are --name value)")
        name, _, inline = word[2:].partition("=")
        key = name.replace("-", "_")
        from_file = key not in props and key.endswith("_file") and key[:-5] in props
        if from_file:
            key = key[:-5]
        if inline or "=" in word:
            value = inline
        else:
            if i + 1 >= len(words):
                raise ToolClientError(f"--{name} needs a value")
            i += 1
            value = words[i]
        if key not in props:
            known = ", ".join("--" + p.replace("_", "-") for p in props) or "none"
            raise ToolClientError(f"unknown argument --{name} (this tool takes {known})")
        if from_file:
            try:
                with open(value, encoding="utf-8") as fh:
                    value = fh.read()
            except OSError as exc:
                raise ToolClientError(f"--{name}: cannot read {value}: {exc.strerror}") from None
        if props[key].get("type", "string") != "string":
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                raise ToolClientError(f"--{name}: not JSON: {value[:80]!r}") from None
        args[key] = value
        i += 1
    return args


USAGE = """usage: $LOOP_TOOL_CMD NAME [--argument value ...]
       $LOOP_TOOL_CMD --list
       $LOOP_HANDOFF_CMD --status STATUS [--summary TEXT] [--data-file F]
       $LOOP_MCP_CMD            (an MCP server on stdin/stdout)"""


def main(argv: list[str]) -> int:
    try:
        return _main(argv)
    except ToolClientError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _main(argv: list[str]) -> int:
    if not argv or argv[0] not in SUBCOMMANDS or argv[1:2] in (["-h"], ["--help"]):
        print(USAGE, file=sys.stderr)
        return 2 if not argv or argv[0] not in SUBCOMMANDS else 0
    command, rest = argv[0], argv[1:]
    if command == "mcp":
        serve_stdio()
        return 0
    if command == "tool":
        if rest[:1] == ["--list"]:
            for spec in list_tools():
                print(f"{spec['name']}: {spec['description']}")
            return 0
        if not rest:
            raise ToolClientError("name the tool: manage.py loop tool NAME (or --list)")
        name, rest = rest[0], rest[1:]
    else:
        name = ALIASES[command]
        if rest and not rest[0].startswith("--"):
            run_id, rest = rest[0], rest[1:]
            if run_id != os.environ.get("LOOP_RUN_ID"):
                raise ToolClientError(f"this agent works on run {os.environ.get('LOOP_RUN_ID')}")
    spec = next((t for t in list_tools() if t["name"] == name), None)
    if spec is None:
        raise ToolClientError(f"no tool '{name}' here (LOOP_TOOLS={os.environ.get('LOOP_TOOLS')})")
    ok, content = call(name, parse_flags(rest, spec.get("parameters", {})))
    print(content)
    return 0 if ok else 1


# --- MCP over stdio: newline-delimited JSON-RPC 2.0 -------------------------------------

SUPPORTED_VERSIONS = ("2025-06-18", "2025-03-26", "2024-11-05")
SERVER_INFO = {"name": "loop-console", "version": "1"}


def _tools() -> list[dict]:
    return [
        {"name": t["name"], "description": t["description"], "inputSchema": t["parameters"]}
        for t in list_tools()
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
            ok, content = call(str(params.get("name", "")), params.get("arguments") or {})
            result = {"content": [{"type": "text", "text": content}], "isError": not ok}
        else:
            return _error(msg_id, -32601, f"method not found: {method}")
    except ToolClientError as exc:
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
