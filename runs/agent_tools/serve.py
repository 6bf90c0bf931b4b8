"""The worker side of tools for CLI agents: a private unix socket, open while the agent runs.

One JSON object per line each way. A request carries the call's token (the agent got it in
its environment); the answer is `{"ok": bool, "content": str}` or, for `list`, the tools'
specs. The socket lives in a fresh 0700 folder (a socket path must stay short, so not
under the run's data folder).
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import shlex
import shutil
import socketserver
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from . import ToolBox

MANAGE_PY = Path(__file__).resolve().parents[2] / "manage.py"
MAX_REQUEST_BYTES = 4 * 1024 * 1024
# The name CLI agents know the console's MCP server by: Claude Code calls its tools
# `mcp__loop__<tool>`.
MCP_SERVER_NAME = "loop"


def tool_command() -> str:
    """The command line that reaches the tools from an agent's shell (`... tool NAME`)."""
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(MANAGE_PY))} loop"


def mcp_server(env: dict[str, str]) -> dict:
    """How an MCP client starts `manage.py loop mcp` for a call: command, args and the
    call's tool environment (clients pass a server only the environment they are given)."""
    return {"command": sys.executable, "args": [str(MANAGE_PY), "loop", "mcp"], "env": dict(env)}


def write_private(env: dict[str, str], name: str, text: str) -> str:
    """A file beside the call's socket, in its 0700 folder (removed with it): for an MCP
    configuration that carries the call's token, which must not show on a command line."""
    path = os.path.join(os.path.dirname(env["LOOP_TOOL_SOCKET"]), name)
    handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    return path


class _Handler(socketserver.StreamRequestHandler):
    def handle(self):
        from django.db import connections

        try:
            line = self.rfile.readline(MAX_REQUEST_BYTES + 1)
            answer = self.server.answer(line)
        except Exception as exc:  # noqa: BLE001 - the agent gets a reason, the worker lives
            answer = {"ok": False, "content": f"tool server error: {type(exc).__name__}"}
        finally:
            connections.close_all()  # this thread's connections; the worker's stay open
        self.wfile.write((json.dumps(answer, ensure_ascii=False) + "\n").encode())


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str, toolbox: ToolBox, token: str):
        self.toolbox = toolbox
        self.token = token
        super().__init__(path, _Handler)

    def answer(self, line: bytes) -> dict:
        if len(line) > MAX_REQUEST_BYTES:
            return {"ok": False, "content": "request too large"}
        try:
            request = json.loads(line or b"{}")
        except json.JSONDecodeError:
            return {"ok": False, "content": "the request is not JSON"}
        if not isinstance(request, dict) or not hmac.compare_digest(
            str(request.get("token", "")), self.token
        ):
            return {"ok": False, "content": "refused: wrong or missing LOOP_TOOL_TOKEN"}
        if request.get("op") == "list":
            return {"ok": True, "tools": self.toolbox.specs()}
        if request.get("op") == "call":
            result = self.toolbox.call(str(request.get("name", "")), request.get("arguments"))
            return {"ok": result.ok, "content": result.content}
        return {"ok": False, "content": "unknown op (expected list or call)"}


@contextmanager
def serving(toolbox: ToolBox | None) -> Iterator[dict[str, str]]:
    """Serve `toolbox` while the block runs; yields the environment the agent needs
    (empty when there are no tools)."""
    if not toolbox:
        yield {}
        return
    folder = tempfile.mkdtemp(prefix="loop-tools-")
    os.chmod(folder, 0o700)
    path = os.path.join(folder, "s")
    token = secrets.token_urlsafe(24)
    server = _Server(path, toolbox, token)
    thread = threading.Thread(target=server.serve_forever, name="agent-tools", daemon=True)
    thread.start()
    ctx = toolbox.context
    env = {
        "LOOP_TOOL_SOCKET": path,
        "LOOP_TOOL_TOKEN": token,
        "LOOP_TOOLS": ",".join(toolbox.names),
        "LOOP_TOOL_CMD": tool_command() + " tool",
        "LOOP_MCP_CMD": tool_command() + " mcp",
        "LOOP_RUN_ID": str(ctx.run_id),
        **({"LOOP_ROLE": ctx.role} if ctx.role else {}),
    }
    if "record_handoff" in toolbox.names and ctx.role:
        # Ends before --status: `$LOOP_HANDOFF_CMD --status completed --summary "..."`.
        env["LOOP_HANDOFF_CMD"] = (
            f"{tool_command()} handoff {ctx.run_id} --role {shlex.quote(ctx.role)}"
        )
    try:
        yield env
    finally:
        server.shutdown()
        server.server_close()
        shutil.rmtree(folder, ignore_errors=True)
