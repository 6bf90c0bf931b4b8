"""A scripted model API for the real agent CLIs, started by the tests on 127.0.0.1.

Each CLI is pointed at it through its own documented base-URL setting and talks to it as
to its vendor (runs/providers/ reaches it through the per-call key proxy):
- Anthropic Messages, streamed, with `tool_use` blocks (Claude Code): `POST .../v1/messages`;
- OpenAI Responses, streamed, with `function_call` items (Codex): `POST .../responses`;
- OpenAI chat completions, streamed, with `tool_calls` (OpenCode's OpenAI-compatible
  provider): `POST .../chat/completions`;
- Gemini `streamGenerateContent` with `functionCall` parts (Gemini CLI).

What it answers is decided from the conversation the CLI sends, not from a queue: a CLI
may retry a call or make one of its own. `plan` is a function of a `Turn` (what the model
is asked: the user's prompts so far, the tools offered, the results of the tools it called)
that returns a `Reply`. The default plan answers with COMPLETE.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import scripted_vendors as vendors


@dataclass
class Turn:
    vendor: str
    model: str
    prompts: list[str]  # the user's messages in the conversation, oldest first
    tools: list[str]  # the names of the tools offered to the model
    results: list[str]  # what the tools called since the last prompt returned

    def tool(self, suffix: str) -> str:
        """The offered tool whose name ends with `suffix` (CLIs prefix an MCP server's)."""
        found = [name for name in self.tools if name.endswith(suffix)]
        assert found, f"no tool ending with {suffix!r} was offered: {self.tools}"
        return found[0]


@dataclass
class Reply:
    text: str = ""
    tool: str | None = None  # call this tool (with `arguments`) instead of ending the turn
    arguments: dict = field(default_factory=dict)
    error: int | None = None  # answer with this HTTP status and `text` as the message
    hang: bool = False  # stream `text`, then nothing until the client goes away
    hold: threading.Event | None = None  # answer only once the test sets it
    tokens_in: int = 120
    tokens_out: int = 30


def complete(turn: Turn) -> Reply:
    return Reply(text=f"Turn {len(turn.prompts)} done. COMPLETE")


class ScriptedAPI:
    def __init__(self, key: str):
        self.key = key
        self.plan: Callable[[Turn], Reply] = complete
        self.requests: list[dict] = []
        self.turns: list[Turn] = []
        self.hanging = threading.Event()  # a `hang` reply is being held open
        self.released = threading.Event()
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> ScriptedAPI:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()

    def reset(self) -> None:
        self.released.set()
        with self.lock:
            self.plan = complete
            self.requests.clear()
            self.turns.clear()
        self.hanging.clear()
        self.released = threading.Event()

    def keys_seen(self) -> set[str]:
        return {r["key"] for r in self.requests}

    def _handler(self):
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_HEAD(self):  # a reachability probe (Claude Code sends one)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self):
                path = self.path.split("?")[0]
                if path.endswith("/models"):  # a model list some CLIs ask for
                    return self._json(200, {"object": "list", "data": []})
                return self._json(404, {"error": {"message": f"no route {path}"}})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                path = self.path.split("?")[0]
                vendor = vendors.vendor_of(path)
                headers = {k.lower(): v for k, v in self.headers.items()}
                key = vendors.key_of(vendor, headers, self.path)
                with api.lock:
                    api.requests.append({"path": path, "vendor": vendor, "key": key, "body": body})
                if vendor is None:
                    return self._json(404, {"error": {"message": f"no route {path}"}})
                if path.endswith("/count_tokens"):
                    return self._json(200, {"input_tokens": 100})
                if key != api.key:
                    return self._error(vendor, 401, "Invalid API key (scripted API)")
                turn = vendors.turn_of(vendor, body, path)
                with api.lock:
                    api.turns.append(turn)
                reply = api.plan(turn)
                if reply.error:
                    return self._error(vendor, reply.error, reply.text)
                if reply.hold is not None:
                    reply.hold.wait(600)
                stream = vendors.STREAMS[vendor](turn, reply)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    for event, data in stream:
                        prefix = f"event: {event}\n" if event else ""
                        line = data if isinstance(data, str) else json.dumps(data)
                        self.wfile.write(f"{prefix}data: {line}\n\n".encode())
                        self.wfile.flush()
                    if reply.hang:
                        api.hanging.set()
                        api.released.wait(600)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _error(self, vendor, status, message):
                self._json(status, vendors.error_body(vendor, status, message))

            def _json(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
