"""Live fan-out: open run pages' streams on one uvicorn process, one message published,
how long until every page has it; the server's memory at 10, 100 and 1,000 open pages.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/live_fanout.py [--pages 10,100,1000] [--samples 5]

The pages are raw HTTP connections reading `/runs/<id>/live/` as a browser's EventSource
would (no rendering): what is measured is the server's side of fan-out. Each sample
publishes one output chunk with a unique mark; the latency of a page is from just before
the publish to the moment its connection has read the mark. Both clocks are this process's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.harness import Bench, make_recipe, median, percentile

RECIPE = """
name: fanout
providers:
  agent: {kind: demo, delay: 0}
nodes:
  - id: work
    provider: agent
    loop:
      prompt: "Next step. When done, output: COMPLETE"
      until: COMPLETE
      max_iterations: 10
"""
CONNECT_BATCH = 50


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_kb(pid: int) -> int:
    return _status(pid, "VmRSS:")


def threads(pid: int) -> int:
    return _status(pid, "Threads:")


def _status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return 0


class Page:
    """One open stream: reads everything, notes when each awaited mark arrives."""

    def __init__(self):
        self.buffer = b""
        self.seen: dict[bytes, float] = {}
        self.connected = asyncio.Event()
        self.waiting: list[bytes] = []

    async def run(self, port: int, path: str, cookie: str) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
            f"Cookie: {cookie}\r\n\r\n".encode()
        )
        await writer.drain()
        try:
            while data := await reader.read(65536):
                now = time.monotonic()
                self.buffer = (self.buffer + data)[-4096:]
                if b"retry:" in self.buffer:
                    self.connected.set()
                for mark in self.waiting:
                    if mark not in self.seen and mark in self.buffer:
                        self.seen[mark] = now
        finally:
            writer.close()


async def fan_out(port, path, cookie, steps, samples, server_pid, publish, hub_connections):
    pages: list[Page] = []
    tasks = []
    rows, figures = [], {}
    for target in steps:
        while len(pages) < target:
            batch = [Page() for _ in range(min(CONNECT_BATCH, target - len(pages)))]
            for page in batch:
                tasks.append(asyncio.create_task(page.run(port, path, cookie)))
            await asyncio.wait_for(
                asyncio.gather(*(p.connected.wait() for p in batch)), timeout=120
            )
            pages += batch
        await asyncio.sleep(2)  # settle: every stream past its first batch
        latencies = []
        for sample in range(samples):
            mark = f"mark-{target}-{sample}".encode()
            for page in pages:
                page.waiting.append(mark)
            started = time.monotonic()
            await asyncio.to_thread(publish, mark.decode(), sample)
            deadline = time.monotonic() + 60
            while any(mark not in p.seen for p in pages) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            missing = sum(mark not in p.seen for p in pages)
            if missing:
                sys.exit(f"{missing} of {len(pages)} pages never got {mark!r}")
            latencies += [(p.seen[mark] - started) * 1000 for p in pages]
            await asyncio.sleep(0.3)
        rss = rss_kb(server_pid)
        server_threads = threads(server_pid)
        hubs = hub_connections()
        figures[str(target)] = {
            "pages": target,
            "deliveries": len(latencies),
            "p50_ms": median(latencies),
            "p95_ms": percentile(latencies, 95),
            "max_ms": max(latencies),
            "server_rss_mb": round(rss / 1024, 1),
            "redis_subscriber_connections": hubs,
            "server_threads": server_threads,
        }
        rows.append(
            [
                target,
                len(latencies),
                median(latencies),
                percentile(latencies, 95),
                max(latencies),
                round(rss / 1024, 1),
                hubs,
                server_threads,
            ]
        )
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return rows, figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", default="10,100,1000")
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args()
    steps = [int(n) for n in args.pages.split(",")]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4 * max(steps) + 256)), hard))
    bench = Bench.open("bench_fanout")
    server = None
    try:
        import redis
        from django.conf import settings
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Group
        from django.test import Client

        from console.roles import ensure_roles
        from runs import live

        try:
            from runs.live_hub import HUB_CLIENT_NAME
        except ImportError:  # measuring a version from before the hub
            HUB_CLIENT_NAME = None

        ensure_roles()
        user = get_user_model().objects.create_user("bench", password="pw-bench")
        user.groups.set(Group.objects.filter(name="operator"))
        recipe = make_recipe(RECIPE, "fanout")
        from runs import services
        from runs.actor import Actor

        run = services.start_run(recipe, actor=Actor.operator(user, "console"), message="fan-out")
        client = Client()
        client.force_login(user)
        cookie = (
            f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
        )

        port = free_port()
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "console.asgi:application",
                "--port",
                str(port),
                "--log-level",
                "warning",
                "--backlog",
                "2048",
            ],
            env={**os.environ, "DATABASE_URL": bench.db_url},
            start_new_session=True,
        )
        import httpx

        for _ in range(200):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        idle_rss = rss_kb(server.pid)
        redis_client = redis.Redis.from_url(settings.LIVE_REDIS_URL)

        def pubsub_connections() -> int:
            """Pub/sub connections to Redis: the one hub, or (before it) one per page."""
            names = {HUB_CLIENT_NAME} if HUB_CLIENT_NAME else {"", None}
            listed = redis_client.client_list(_type="pubsub")
            return sum(1 for c in listed if c.get("name") in names)

        others = pubsub_connections()  # other consoles' on this Redis, when unnamed

        def hub_connections() -> int:
            return pubsub_connections() - others

        def publish(mark: str, sample: int) -> None:
            try:
                live.publish_output(run.pk, 1, mark, offset=sample * 100)
            except TypeError:  # a version from before offsets
                live.publish_output(run.pk, 1, mark)

        rows, figures = asyncio.run(
            fan_out(
                port,
                f"/runs/{run.pk}/live/",
                cookie,
                steps,
                args.samples,
                server.pid,
                publish,
                hub_connections,
            )
        )
        figures["idle_server_rss_mb"] = round(idle_rss / 1024, 1)
        bench.report(
            "live_fanout",
            f"Live fan-out on one uvicorn process (idle RSS {idle_rss / 1024:.1f} MB): "
            "one published chunk → every open stream",
            [
                "pages",
                "deliveries",
                "p50 ms",
                "p95 ms",
                "max ms",
                "server RSS MB",
                "Redis subscriber conns",
                "server threads",
            ],
            rows,
            figures,
        )
    finally:
        if server is not None:
            os.killpg(server.pid, 15)
            server.wait()
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        bench.close()


if __name__ == "__main__":
    main()
