"""Helpers shared by the fake agents (stdlib only: the fakes run as plain scripts)."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

SIGNAL_ASK = re.compile(r"\boutput:?\s+([A-Z][A-Z0-9_]{2,})\b")


def emit(event: dict) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def option(argv: list[str], flag: str, default=None):
    return argv[argv.index(flag) + 1] if flag in argv else default


class State:
    """Per-working-directory memory: sessions, and a log of every call for the tests."""

    def __init__(self, folder: Path):
        self.folder = folder
        (folder / "sessions").mkdir(parents=True, exist_ok=True)

    def calls(self) -> list[dict]:
        path = self.folder / "calls.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def log_call(self, entry: dict) -> int:
        with (self.folder / "calls.jsonl").open("a") as out:
            out.write(json.dumps(entry) + "\n")
        return len(self.calls())

    def log_tool(self, entry: dict) -> None:
        """A tool call this fake made (tools.jsonl, beside the calls)."""
        with (self.folder / "tools.jsonl").open("a") as out:
            out.write(json.dumps(entry) + "\n")

    def session(self, session_id: str) -> dict | None:
        path = self.folder / "sessions" / f"{session_id}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def save_session(self, session_id: str, data: dict) -> None:
        (self.folder / "sessions" / f"{session_id}.json").write_text(json.dumps(data))


def payload_for(schema: dict, done: bool):
    """A JSON value that fits `schema` (booleans say whether the work is done)."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        return {k: payload_for(v, done) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    if kind == "boolean":
        return done
    if kind in ("integer", "number"):
        return 1
    return "fake"


def prose(label: str, turn: int, session_id: str, prompt: str, calls: int, after: int) -> list[str]:
    """The fake's answer, in pieces that are streamed one by one."""
    pieces = [
        f"{label} turn {turn} of session {session_id}. ",
        f"I read {len(prompt)} characters. ",
        "Working on it. ",
    ]
    signal = SIGNAL_ASK.search(prompt)
    if signal and calls >= after:
        pieces.append(f"All done.\n<promise>{signal.group(1)}</promise>\n")
    elif signal:
        pieces.append("Not finished yet.\n")
    return pieces


def pause(seconds: float) -> None:
    if seconds:
        time.sleep(seconds)


def state_dir(name: str) -> Path:
    return Path(os.getcwd()) / name


class McpClient:
    """What a CLI agent does with a stdio MCP server: start it, initialize, list its tools
    and call them (newline-delimited JSON-RPC 2.0)."""

    def __init__(self, command: str, args: list[str], env: dict[str, str]):
        import subprocess

        self.proc = subprocess.Popen(
            [command, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        self.next_id = 0
        init = self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "fake-agent", "version": "0"},
            },
        )
        self.protocol = init.get("result", {}).get("protocolVersion")
        self.notify("notifications/initialized")
        self.tools = self.request("tools/list").get("result", {}).get("tools", [])

    def notify(self, method: str) -> None:
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}) + "\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict | None = None) -> dict:
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        return json.loads(line) if line else {"error": {"message": "the server closed"}}

    def call(self, name: str, arguments: dict) -> tuple[bool, str]:
        answer = self.request("tools/call", {"name": name, "arguments": arguments})
        if "error" in answer:
            return False, answer["error"].get("message", "error")
        result = answer["result"]
        text = "".join(c.get("text", "") for c in result.get("content", []))
        return not result.get("isError"), text

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def scripted_tool_calls(argv: list[str]) -> list[dict]:
    """`--fake-tool-calls FILE`: the calls this fake makes, [{name, arguments}, ...]."""
    path = option(argv, "--fake-tool-calls")
    return json.loads(Path(path).read_text()) if path else []
