"""Provider limits: 50 runs against a provider that answers 3 calls at once.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/provider_limits.py [--runs 50] [--call-seconds 0.5]

A scripted OpenAI-compatible server on 127.0.0.1 takes `--call-seconds` to answer each call
and answers 429 beyond 3 at once; the recipe's provider says `max_concurrent: 3`. Two
workers of two processes each run the 50 one-call loops. Figures, from one run:
- the console's time from the first start to the last run finished;
- the ideal: 50 × call time ÷ 3, what 3 slots kept always busy would take;
- the floor: the same 50 calls made straight to the server by 3 threads (no console);
- the ratios to both, and how many 429s the server gave (0: the slots held).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.harness import Bench, make_recipe, wait_runs
from tests.providers.fakes.http_server import FakeAI

KEY = "sk-bench-provider-key"
SLOTS = 3
RECIPE = """
name: limited-{n}
provider: agent
model: bench-model
providers:
  agent: {{kind: openai, base_url: "{url}/v1", api_key_env: BENCH_PROVIDER_KEY, max_concurrent: {slots}}}
nodes:
  - id: work
    loop:
      prompt: "Say it once."
      until: Done
      max_iterations: 1
"""


def slow_server(call_seconds: float) -> FakeAI:
    server = FakeAI(KEY).start()
    server.capacity = SLOTS

    def answer(body):
        time.sleep(call_seconds)
        return "Said. Done."

    server.answers = [answer] * 10_000
    return server


def floor_seconds(server: FakeAI, calls: int) -> float:
    """The same calls straight to the server, 3 at a time: the fastest honest way."""
    body = {"model": "bench-model", "stream": True, "messages": [{"role": "user", "content": "x"}]}

    def call(_):
        with httpx.Client(timeout=60) as client:
            with client.stream(
                "POST",
                f"{server.url}/v1/chat/completions",
                json=body,
                headers={"Authorization": f"Bearer {KEY}"},
            ) as response:
                for _ in response.iter_lines():
                    pass

    started = time.monotonic()
    with ThreadPoolExecutor(SLOTS) as pool:
        list(pool.map(call, range(calls)))
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--call-seconds", type=float, default=0.5)
    options = parser.parse_args()
    os.environ.update(
        BENCH_PROVIDER_KEY=KEY,
        LOOP_PROVIDER_ENV="BENCH_PROVIDER_KEY",
        LOOP_PROVIDER_HOSTS="127.0.0.1",
        LOOP_PROVIDER_HTTP_HOSTS="127.0.0.1",
        LOOP_PROVIDER_POLL_SECONDS="1",
    )
    bench = Bench.open("bench_limits")
    server = slow_server(options.call_seconds)
    try:
        from runs import services
        from runs.actor import ENGINE
        from runs.models import Run

        recipes = [
            make_recipe(RECIPE.format(n=n, url=server.url, slots=SLOTS), f"limited-{n}")
            for n in range(options.runs)
        ]
        bench.start_worker(concurrency=2)
        bench.start_worker(concurrency=2)
        started = time.monotonic()
        runs = [services.start_run(recipe, actor=ENGINE, message="go") for recipe in recipes]
        wait_runs(runs, timeout=600)
        console = time.monotonic() - started
        statuses = set(
            Run.objects.filter(pk__in=[r.pk for r in runs]).values_list("status", flat=True)
        )
        throttled, peak = server.throttled, server.peak
        floor = floor_seconds(server, options.runs)
        ideal = options.runs * options.call_seconds / SLOTS
        figures = {
            "runs": options.runs,
            "call_seconds": options.call_seconds,
            "slots": SLOTS,
            "console_seconds": round(console, 2),
            "ideal_seconds": round(ideal, 2),
            "floor_seconds": round(floor, 2),
            "console_over_ideal": round(console / ideal, 2),
            "console_over_floor": round(console / floor, 2),
            "server_peak_at_once": peak,
            "server_429s": throttled,
            "statuses": sorted(statuses),
        }
        bench.report(
            "provider_limits",
            f"{options.runs} runs through a {SLOTS}-slot provider ({options.call_seconds} s a call)",
            ["console s", "ideal s", "floor s", "÷ ideal", "÷ floor", "peak", "429s"],
            [
                [
                    figures["console_seconds"],
                    figures["ideal_seconds"],
                    figures["floor_seconds"],
                    figures["console_over_ideal"],
                    figures["console_over_floor"],
                    peak,
                    throttled,
                ]
            ],
            figures,
        )
    finally:
        server.stop()
        bench.close()


if __name__ == "__main__":
    main()
