"""Live update latency: from an iteration's event (committed) to its appearance in an open
run page in Chromium, through the ASGI server and the SSE stream.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/live_latency.py [--samples 100]

The benchmark plays the engine: it commits a finished Iteration and its
`iteration_completed` event, notes the time, and waits until a MutationObserver in the page
sees the iteration's card. Both clocks are this machine's wall clock.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's loop in this thread
from bench.harness import ROOT, Bench, make_recipe, median, percentile

RECIPE = """
name: live
providers:
  agent: {kind: demo, delay: 0}
nodes:
  - id: work
    provider: agent
    loop:
      prompt: "Next step. When done, output: COMPLETE"
      until: COMPLETE
      max_iterations: 100000
"""
OBSERVER = """
window.__seen = {};
new MutationObserver(() => {
  for (const el of document.querySelectorAll('[id^="iteration-"]')) {
    if (!(el.id in window.__seen)) window.__seen[el.id] = Date.now();
  }
}).observe(document.body, {childList: true, subtree: true});
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=100)
    args = parser.parse_args()
    bench = Bench.open("bench_live")
    server = None
    try:
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Group
        from django.db import transaction
        from django.utils import timezone

        from console.roles import ensure_roles
        from runs import services
        from runs.models import Iteration, NodeRun

        ensure_roles()
        user = get_user_model().objects.create_user("bench", password="pw-bench")
        user.groups.set(Group.objects.filter(name="operator"))
        from runs.actor import Actor

        run = services.start_run(
            make_recipe(RECIPE, "live"), actor=Actor.operator(user, "console"), message="live"
        )
        with transaction.atomic():
            run.status = "running"
            run.save()
            row = NodeRun.objects.create(
                run=run, node_id="work", kind="loop", status="running", max_iterations=100000
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
            ],
            cwd=ROOT,
            env={**os.environ, "DATABASE_URL": bench.db_url},
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        import httpx

        for _ in range(100):
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        from playwright.sync_api import sync_playwright

        latencies = []
        with sync_playwright() as pw:
            from tests import find_chromium

            browser = pw.chromium.launch(
                executable_path=find_chromium.executable(),
                headless=True,
                args=find_chromium.ARGS,
            )
            # The page's CSP forbids eval; the probe below is the benchmark's, not the page's.
            page = browser.new_context(bypass_csp=True).new_page()
            page.goto(url + "/accounts/login/")
            page.fill("input[name=username]", "bench")
            page.fill("input[name=password]", "pw-bench")
            page.click("button[type=submit]")
            page.wait_for_url(url + "/")
            page.goto(f"{url}/runs/{run.pk}/")
            page.evaluate(OBSERVER)
            page.wait_for_timeout(1500)  # the stream connects
            for number in range(1, args.samples + 1):
                with transaction.atomic():
                    now = timezone.now()
                    it = Iteration.objects.create(
                        run=run,
                        node_run=row,
                        node_id="work",
                        number=number,
                        status="completed",
                        prompt="p",
                        output=f"output {number}",
                        started_at=now,
                        finished_at=now,
                        duration_ms=1,
                    )
                    row.iteration_count = number
                    row.save(update_fields=["iteration_count"])
                    run.append_event("iteration_completed", "work", iteration=number, channels=[])
                committed = time.time() * 1000
                key = f"iteration-{it.pk}"
                page.wait_for_function(f"window.__seen['{key}'] !== undefined", timeout=10_000)
                latencies.append(page.evaluate(f"window.__seen['{key}']") - committed)
                page.wait_for_timeout(100)
            browser.close()
        figures = {
            "samples": len(latencies),
            "p50_ms": median(latencies),
            "p95_ms": percentile(latencies, 95),
            "max_ms": max(latencies),
        }
        bench.report(
            "live_latency",
            "Live update latency: event committed → iteration card in the page (Chromium)",
            ["samples", "p50 ms", "p95 ms", "max ms"],
            [[len(latencies), figures["p50_ms"], figures["p95_ms"], figures["max_ms"]]],
            figures,
        )
    finally:
        if server is not None:
            os.killpg(server.pid, 15)
            server.wait()
        from django.db import connection

        with connection.cursor() as cursor:  # streams may still hold a session briefly
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        bench.close()


if __name__ == "__main__":
    main()
