"""The worker side of tools for CLI agents: a unix socket that belongs to one agent call.

One JSON object per line each way. A request carries the call's token; the answer is
`{"ok": bool, "content": str}` or, for `list`, the tools' specs. The channel belongs to
the call it was opened for, three ways:

- the socket and the token file live in the call's private folder (runs.sandbox.CallSpace),
  which only that call's sandbox sees (at /run/loop); the token is never in an
  environment, so no other process can read it from /proc;
- the server asks the kernel who is calling (SO_PEERCRED) and answers only the agent's
  own process tree;
- the socket is closed, and the folder removed, when the call ends.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import shlex
import socket
import socketserver
import struct
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from . import ToolBox

MAX_REQUEST_BYTES = 4 * 1024 * 1024
# The name CLI agents know the console's MCP server by: Claude Code calls its tools
# `mcp__loop__<tool>`.
MCP_SERVER_NAME = "loop"
RELAY = "loop_tools.py"
SOCKET = "s"
TOKEN = "token"


def mcp_server(space, env: dict[str, str]) -> dict:
    """How an MCP client starts the tools' MCP server for a call: command, args and the
    call's tool environment (clients pass a server only the environment they are given)."""
    return {"command": sys.executable, "args": [space.relay_path(RELAY), "mcp"], "env": dict(env)}


def _peer_pid(sock: socket.socket) -> int | None:
    try:
        data = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    return struct.unpack("3i", data)[0]


class _Handler(socketserver.StreamRequestHandler):
    def handle(self):
        from django.db import connections

        try:
            line = self.rfile.readline(MAX_REQUEST_BYTES + 1)
            answer = self.server.answer(line, _peer_pid(self.request))
        except Exception as exc:  # noqa: BLE001 - the agent gets a reason, the worker lives
            answer = {"ok": False, "content": f"tool server error: {type(exc).__name__}"}
        finally:
            connections.close_all()  # this thread's connections; the worker's stay open
        self.wfile.write((json.dumps(answer, ensure_ascii=False) + "\n").encode())


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str, toolbox: ToolBox, token: str, space):
        self.toolbox = toolbox
        self.token = token
        self.space = space
        super().__init__(path, _Handler)

    def answer(self, line: bytes, peer: int | None) -> dict:
        if not self.space.owns(peer):
            return {"ok": False, "content": "refused: this channel belongs to another agent"}
        if len(line) > MAX_REQUEST_BYTES:
            return {"ok": False, "content": "request too large"}
        try:
            request = json.loads(line or b"{}")
        except json.JSONDecodeError:
            return {"ok": False, "content": "the request is not JSON"}
        if not isinstance(request, dict) or not hmac.compare_digest(
            str(request.get("token", "")), self.token
        ):
            return {"ok": False, "content": "refused: wrong or missing token"}
        if request.get("op") == "list":
            return {"ok": True, "tools": self.toolbox.specs()}
        if request.get("op") == "call":
            result = self.toolbox.call(str(request.get("name", "")), request.get("arguments"))
            return {"ok": result.ok, "content": result.content}
        return {"ok": False, "content": "unknown op (expected list or call)"}


@contextmanager
def serving(toolbox: ToolBox | None, space) -> Iterator[dict[str, str]]:
    """Serve `toolbox` to the process started in `space` (a runs.sandbox.CallSpace) while
    the block runs; yields the environment the agent needs (empty without tools)."""
    if not toolbox:
        yield {}
        return
    path = os.path.join(space.folder, SOCKET)
    token = secrets.token_urlsafe(24)
    server = _Server(path, toolbox, token, space)
    thread = threading.Thread(target=server.serve_forever, name="agent-tools", daemon=True)
    thread.start()
    ctx = toolbox.context
    relay = f"{shlex.quote(sys.executable)} {shlex.quote(space.relay_path(RELAY))}"
    env = {
        "LOOP_TOOL_SOCKET": space.inside(SOCKET),
        "LOOP_TOOL_TOKEN_FILE": space.write(TOKEN, token),
        "LOOP_TOOLS": ",".join(toolbox.names),
        "LOOP_TOOL_CMD": f"{relay} tool",
        "LOOP_MCP_CMD": f"{relay} mcp",
        "LOOP_RUN_ID": str(ctx.run_id),
        **({"LOOP_ROLE": ctx.role} if ctx.role else {}),
    }
    if "record_handoff" in toolbox.names and ctx.role:
        # Ends before --status: `$LOOP_HANDOFF_CMD --status completed --summary "..."`.
        env["LOOP_HANDOFF_CMD"] = f"{relay} handoff {ctx.run_id} --role {shlex.quote(ctx.role)}"
    try:
        yield env
    finally:
        server.shutdown()
        server.server_close()
        try:
            os.unlink(path)
        except OSError:
            pass
