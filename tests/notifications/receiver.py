"""A webhook receiver on 127.0.0.1, started by a test: it checks each request's signature
with the snippet documented in docs/operations.md (copied out of the page, not rewritten)
and answers with the status codes the test lines up."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.conftest import ROOT


def documented_verifier():
    """`verify_loop_webhook` as docs/operations.md prints it."""
    page = (ROOT / "docs" / "operations.md").read_text()
    found = re.search(r"```python\n(# Verify a Loop Console webhook.*?)```", page, re.S)
    assert found, "docs/operations.md has no verification snippet"
    namespace: dict = {}
    exec(compile(found.group(1), "docs/operations.md", "exec"), namespace)  # noqa: S102
    return namespace["verify_loop_webhook"]


class Receiver:
    def __init__(self, secret: str = "", answers=(200,), body: bytes = b"ok"):
        self.secret = secret
        self.answers = list(answers)
        self.answer_body = body
        self.requests: list[dict] = []
        self.verify = documented_verifier()
        self.arrived = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                headers = {key: value for key, value in self.headers.items()}
                code = receiver.answers.pop(0) if len(receiver.answers) > 1 else receiver.answers[0]
                self.send_response(code)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(receiver.answer_body)
                with receiver.arrived:
                    receiver.requests.append(
                        {
                            "path": self.path,
                            "headers": headers,
                            "body": body,
                            "json": json.loads(body or b"null"),
                            "verified": receiver.verify(receiver.secret, headers, body),
                            "answered": code,
                        }
                    )
                    receiver.arrived.notify_all()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
