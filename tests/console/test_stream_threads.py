"""Open live streams cost no thread each under the ASGI server (uvicorn, as `make run`
serves): forty open run pages and the server has about as many threads as with one."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.test import Client

from tests.conftest import ROOT, wait_for

pytestmark = pytest.mark.skipif(
    not settings.LIVE_REDIS_URL, reason="streams hold no request thread once on Redis"
)
PAGES = 40


def threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no thread count")


def open_stream(port: int, path: str, cookie: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=120)
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        f"Cookie: {cookie}\r\n\r\n".encode()
    )
    received = b""
    while b"retry:" not in received:  # the stream is open and subscribed
        chunk = sock.recv(4096)
        assert chunk, received
        received += chunk
    return sock


def test_open_streams_hold_no_thread_each(transactional_db, worker_env, gated_run, viewer):
    run, _ = gated_run
    client = Client()
    client.force_login(viewer)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "console.asgi:application", "--port", str(port)],
        cwd=ROOT,
        # Not labelled as a worker: tests that count the workers' connections see only theirs.
        env={**worker_env, "PGAPPNAME": "loop-console-test-web"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    streams = []
    try:

        def up():
            try:
                return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, message="uvicorn to serve")
        path = f"/runs/{run.pk}/live/?after={run.last_seq}"
        streams.append(open_stream(port, path, cookie))
        one = threads(server.pid)
        # Half of them opened behind the run: those read the crumbs they missed first.
        behind = f"/runs/{run.pk}/live/?after=0"
        streams += [open_stream(port, behind if n % 2 else path, cookie) for n in range(PAGES - 1)]
        many = threads(server.pid)
        assert many <= one + 8, f"{PAGES} open streams: {many} threads (one stream: {one})"
    finally:
        for sock in streams:
            sock.close()
        server.terminate()
        server.wait(30)
