"""What the in-run tool server costs to start: the hand-written, standard-library MCP server
(runs/agent_tools/relay/loop_tools.py `mcp`) against an equivalent built on the MCP Python
SDK (`mcp`), which forwards `tools/list` and `tools/call` to the same worker socket.

    .venv/bin/python -m bench.mcp_relay_startup [--starts 30]

Each start spawns the server as an agent's MCP client does, sends `initialize`, the
`initialized` notification and `tools/list`, and stops the clock when the tools arrive
(they come from a stand-in worker socket in this process). Prints milliseconds per start
(median and 90th percentile) and the resident memory of each server. Unsandboxed, so the
SDK server can import its packages: the agent's sandbox shows it only the relay's folder.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

RELAY = Path(__file__).resolve().parents[1] / "runs" / "agent_tools" / "relay" / "loop_tools.py"
TOOLS = [
    {
        "name": "record_handoff",
        "description": "Record your handoff",
        "parameters": {"type": "object", "properties": {"status": {"type": "string"}}},
    }
]
# The same server on the SDK: its low-level Server, answering from the worker socket
# through the relay's own client functions.
SDK_SERVER = f"""
import sys, anyio
sys.path.insert(0, {str(RELAY.parent)!r})
import loop_tools
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
import mcp.types as types


async def list_tools(ctx, params):
    tools = [
        types.Tool(name=t["name"], description=t.get("description", ""),
                   input_schema=t.get("parameters") or {{"type": "object"}})
        for t in loop_tools.list_tools()
    ]
    return types.ListToolsResult(tools=tools)


async def call_tool(ctx, params):
    ok, content = loop_tools.call(params.name, params.arguments or {{}})
    return types.CallToolResult(content=[types.TextContent(type="text", text=content)],
                                is_error=not ok)


server = Server("loop", on_list_tools=list_tools, on_call_tool=call_tool)


async def main():
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())

anyio.run(main)
"""


def stand_in_socket(path: str, token: str) -> None:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(16)

    def serve():
        while True:
            conn, _ = server.accept()
            with conn, conn.makefile("rb") as reader:
                request = json.loads(reader.readline() or b"{}")
                ok = request.get("token") == token
                conn.sendall((json.dumps({"ok": ok, "tools": TOOLS}) + "\n").encode())

    threading.Thread(target=serve, daemon=True).start()


def one_start(argv: list[str], env: dict) -> tuple[float, int]:
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    proc.stdin.write(json.dumps(messages[0]).encode() + b"\n")
    proc.stdin.flush()
    proc.stdout.readline()
    for message in messages[1:]:
        proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()
    answer = json.loads(proc.stdout.readline())
    elapsed = (time.perf_counter() - started) * 1000
    assert answer["result"]["tools"][0]["name"] == "record_handoff", answer
    with open(f"/proc/{proc.pid}/status") as status:
        rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))
    proc.stdin.close()
    proc.wait(10)
    return elapsed, rss


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--starts", type=int, default=30)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="mcp-bench-")
    token = "bench-token"
    sock = os.path.join(folder, "s")
    stand_in_socket(sock, token)
    Path(folder, "token").write_text(token)
    sdk = Path(folder, "sdk_server.py")
    sdk.write_text(SDK_SERVER)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "LOOP_TOOL_SOCKET": sock,
        "LOOP_TOOL_TOKEN_FILE": os.path.join(folder, "token"),
    }
    rows = {
        "standard library (loop_tools.py mcp)": [sys.executable, str(RELAY), "mcp"],
        "MCP Python SDK (lowlevel Server)": [sys.executable, str(sdk)],
    }
    results = {
        name: [one_start(argv, env) for _ in range(args.starts)] for name, argv in rows.items()
    }
    load = os.getloadavg()[0]
    print(f"{args.starts} starts each, load average {load:.1f} on {os.cpu_count()} cores")
    print(f"{'server':40} {'median ms':>10} {'p90 ms':>8} {'RSS MB':>7}")
    for name, runs in results.items():
        times = sorted(t for t, _ in runs)
        p90 = times[int(len(times) * 0.9) - 1]
        rss = statistics.median(r for _, r in runs) / 1024
        print(f"{name:40} {statistics.median(times):10.1f} {p90:8.1f} {rss:7.1f}")


if __name__ == "__main__":
    main()
