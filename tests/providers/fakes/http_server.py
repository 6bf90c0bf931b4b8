"""A local server speaking the OpenAI chat-completions and Anthropic Messages streaming APIs.

Started by a test fixture on a free 127.0.0.1 port. Tests steer it:
- `fail_next(status, times=1)` answers the next calls with an error in the API's shape;
- `answers` is a queue of what to answer (default: a description of the request): a text,
  or `{"text": ..., "tool_calls": [{"name": ..., "arguments": {...}}]}` to call tools the
  way each API streams them (OpenAI: `delta.tool_calls` pieces and finish_reason
  `tool_calls`; Anthropic: `tool_use` blocks with `input_json_delta` and stop_reason
  `tool_use`), or a function of the request body that returns one of those;
- `delay` pauses between streamed chunks;
- `requests` records every call (path, headers, JSON body);
- `capacity` (None: unlimited) answers 429 with `Retry-After: retry_after` to a call that
  arrives while that many are being answered (`throttled` counts them); `peak` is the most
  answered at once.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeAI:
    def __init__(self, key: str):
        self.key = key
        self.delay = 0.0
        self.answers: list[str] = []
        self.failures: list[int] = []
        self.requests: list[dict] = []
        self.aborted = 0  # streams the client closed before the end
        self.capacity: int | None = None
        self.retry_after = 1
        self.in_flight = self.peak = self.throttled = 0
        self.ids = 0
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.server.block_on_close = False  # a test may leave a slow answer behind
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> FakeAI:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def reset(self) -> None:
        with self.lock:
            self.delay = 0.0
            self.answers.clear()
            self.failures.clear()
            self.requests.clear()
            self.aborted = 0
            self.capacity = None
            self.retry_after = 1
            self.in_flight = self.peak = self.throttled = 0

    def next_id(self) -> str:
        with self.lock:
            self.ids += 1
            return f"{self.ids:04d}"

    def fail_next(self, status: int, times: int = 1) -> None:
        self.failures.extend([status] * times)

    # --- what the fake says ----------------------------------------------------------

    def _enter(self) -> bool:
        """Count a call in; False (a 429) when `capacity` calls are already answered."""
        with self.lock:
            if self.capacity is not None and self.in_flight >= self.capacity:
                self.throttled += 1
                return False
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            return True

    def _take(self, path: str, headers: dict, body: dict) -> tuple[int | None, dict]:
        with self.lock:
            if self.failures:
                return self.failures.pop(0), {}
            answer = self.answers.pop(0) if self.answers else None
        if callable(answer):
            answer = answer(body)
        if answer is None:
            answer = self._describe(body)
        return None, answer if isinstance(answer, dict) else {"text": answer}

    def _describe(self, body: dict) -> str:
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            return json.dumps(_fit(fmt["json_schema"]["schema"]))
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        return (
            f"Fake {body.get('model')} turn {len(users)}, "
            f"with {len(body.get('messages', [])) - 1} earlier messages. Done."
        )

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):  # http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                headers = {k.lower(): v for k, v in self.headers.items()}
                with fake.lock:
                    fake.requests.append({"path": self.path, "headers": headers, "body": body})
                anthropic = self.path.endswith("/v1/messages")
                if not anthropic and not self.path.endswith("/chat/completions"):
                    return self._error(404, "not_found", f"no route {self.path}", anthropic)
                given = (
                    headers.get("x-api-key")
                    if anthropic
                    else headers.get("authorization", "").removeprefix("Bearer ")
                )
                if given != fake.key:
                    return self._error(401, "authentication_error", "Invalid API key", anthropic)
                if not fake._enter():
                    return self._error(429, "rate_limit_error", "too many at once", anthropic)
                self.counted = True
                try:
                    self._answer(headers, body, anthropic)
                finally:
                    self._leave()

            def _leave(self):
                """The call is answered once its last event is about to go out: a client
                reads it and may call again before this thread is done."""
                if getattr(self, "counted", False):
                    self.counted = False
                    with fake.lock:
                        fake.in_flight -= 1

            def _answer(self, headers, body, anthropic):
                status, answer = fake._take(self.path, headers, body)
                if status:
                    return self._error(status, _error_type(status), f"injected {status}", anthropic)
                text, calls = answer.get("text", ""), answer.get("tool_calls") or []
                try:
                    if anthropic:
                        self._stream_anthropic(body, text, calls)
                    else:
                        self._stream_openai(body, text, calls)
                except (BrokenPipeError, ConnectionResetError):
                    with fake.lock:
                        fake.aborted += 1

            def _error(self, status, kind, message, anthropic):
                if anthropic:
                    payload = {"type": "error", "error": {"type": kind, "message": message}}
                else:
                    payload = {"error": {"message": message, "type": kind, "code": status}}
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                if status == 429:
                    self.send_header("Retry-After", str(fake.retry_after))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _start_stream(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True

            def _send(self, data: dict | str, event: str | None = None):
                line = data if isinstance(data, str) else json.dumps(data)
                prefix = f"event: {event}\n" if event else ""
                self.wfile.write(f"{prefix}data: {line}\n\n".encode())
                self.wfile.flush()

            def _stream_openai(self, body, text, calls):
                self._start_stream()
                base = {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "model": body.get("model"),
                }
                self._send(
                    {
                        **base,
                        "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
                    }
                )
                for piece in _pieces(text) if text else []:
                    time.sleep(fake.delay)
                    self._send({**base, "choices": [{"index": 0, "delta": {"content": piece}}]})
                for index, call in enumerate(calls):
                    first = {
                        "index": index,
                        "id": f"call_{fake.next_id()}",
                        "type": "function",
                        "function": {"name": call["name"], "arguments": ""},
                    }
                    self._send(
                        {**base, "choices": [{"index": 0, "delta": {"tool_calls": [first]}}]}
                    )
                    for piece in _split(json.dumps(call.get("arguments") or {})):
                        time.sleep(fake.delay)
                        more = {"index": index, "function": {"arguments": piece}}
                        self._send(
                            {**base, "choices": [{"index": 0, "delta": {"tool_calls": [more]}}]}
                        )
                finish = "tool_calls" if calls else "stop"
                self._send(
                    {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
                )
                if (body.get("stream_options") or {}).get("include_usage"):
                    usage = {
                        "prompt_tokens": _count(body),
                        "completion_tokens": len(_pieces(text)),
                        "total_tokens": 0,
                    }
                    self._send({**base, "choices": [], "usage": usage})
                self._leave()
                self._send("[DONE]")

            def _stream_anthropic(self, body, text, calls):
                self._start_stream()
                start = {
                    "type": "message_start",
                    "message": {
                        "id": "msg_fake",
                        "type": "message",
                        "role": "assistant",
                        "model": body.get("model"),
                        "content": [],
                        "usage": {"input_tokens": _count(body), "output_tokens": 1},
                    },
                }
                self._send(start, "message_start")
                self._send({"type": "ping"}, "ping")
                index = 0
                if text or not calls:
                    self._send(
                        {
                            "type": "content_block_start",
                            "index": 0,
                            "content_block": {"type": "text", "text": ""},
                        },
                        "content_block_start",
                    )
                    for piece in _pieces(text):
                        time.sleep(fake.delay)
                        self._send(
                            {
                                "type": "content_block_delta",
                                "index": 0,
                                "delta": {"type": "text_delta", "text": piece},
                            },
                            "content_block_delta",
                        )
                    self._send({"type": "content_block_stop", "index": 0}, "content_block_stop")
                    index = 1
                for offset, call in enumerate(calls):
                    block = {
                        "type": "tool_use",
                        "id": f"toolu_{fake.next_id()}",
                        "name": call["name"],
                        "input": {},
                    }
                    self._send(
                        {
                            "type": "content_block_start",
                            "index": index + offset,
                            "content_block": block,
                        },
                        "content_block_start",
                    )
                    for piece in _split(json.dumps(call.get("arguments") or {})):
                        time.sleep(fake.delay)
                        self._send(
                            {
                                "type": "content_block_delta",
                                "index": index + offset,
                                "delta": {"type": "input_json_delta", "partial_json": piece},
                            },
                            "content_block_delta",
                        )
                    self._send(
                        {"type": "content_block_stop", "index": index + offset},
                        "content_block_stop",
                    )
                self._send(
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "tool_use" if calls else "end_turn"},
                        "usage": {"output_tokens": len(_pieces(text))},
                    },
                    "message_delta",
                )
                self._leave()
                self._send({"type": "message_stop"}, "message_stop")

        return Handler


def _pieces(text: str) -> list[str]:
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]


def _split(text: str, parts: int = 3) -> list[str]:
    """JSON arguments in a few pieces, cut anywhere, as the APIs stream them."""
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _count(body: dict) -> int:
    return sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))


def _error_type(status: int) -> str:
    return {429: "rate_limit_error", 401: "authentication_error", 400: "invalid_request_error"}.get(
        status, "api_error"
    )


def _fit(schema: dict):
    if schema.get("type") == "object" or "properties" in schema:
        return {k: _fit(v) for k, v in (schema.get("properties") or {}).items()}
    return {"boolean": True, "integer": 1, "number": 1, "array": []}.get(schema.get("type"), "fake")
