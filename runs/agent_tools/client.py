"""The agent side of tools: `manage.py loop tool NAME --arg value ...` and aliases such as
`manage.py loop handoff RUN_ID --role R --status S`, forwarded to the worker's socket.

Standard library only, and no Django: it runs in the agent's process, which has no
console settings and no database. `manage.py` hands `loop` commands here whenever
LOOP_TOOL_SOCKET is set.
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
    payload = {**payload, "token": os.environ.get("LOOP_TOOL_TOKEN", "")}
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


USAGE = """usage: manage.py loop tool NAME [--argument value ...]
       manage.py loop tool --list
       manage.py loop handoff RUN_ID --role ROLE --status STATUS [--summary TEXT] [--data-file F]
       manage.py loop mcp            (an MCP server on stdin/stdout)"""


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
        from .mcp import serve_stdio

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
