"""Gate latency: from the approve request to the start of the next iteration.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/gate_latency.py [--gates 100]

An interactive loop with an instant agent opens a gate after every iteration. For each of
GATES gates the benchmark calls services.approve (what the page, the API and the CLI all
call) with feedback, and measures from just before that call to the next iteration's
`started_at` (set by the worker when it claims the iteration). One worker, concurrency 2
(--concurrency).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.harness import Bench, make_recipe, median, percentile

RECIPE = """
name: gated-loop
interactive: true
providers:
  instant: {{kind: demo, delay: 0}}
nodes:
  - id: work
    provider: instant
    loop:
      prompt: "Draft it again, using this feedback: $LOOP_USER_INPUT"
      until: NEVER_SAID
      max_iterations: {iterations}
      interactive: true
      gate_message: Read the draft.
"""


def wait_for(predicate, timeout: float = 30, interval: float = 0.001):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    sys.exit("timed out waiting for the engine")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gates", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=2, help="worker processes")
    options = parser.parse_args()
    bench = Bench.open("bench_gates")
    try:
        from runs import services
        from runs.actor import ENGINE, Actor
        from runs.models import Gate, Iteration

        recipe = make_recipe(RECIPE.format(iterations=options.gates + 1), "gated-loop")
        bench.start_worker(concurrency=options.concurrency)
        run = services.start_run(recipe, actor=ENGINE, message="gates")
        latencies, approve_ms = [], []
        for number in range(1, options.gates + 1):
            gate = wait_for(
                lambda: Gate.objects.filter(run=run, status=Gate.Status.PENDING).first()
            )
            asked = time.time()
            services.approve(gate.pk, Actor("api"), comment=f"again {number}")
            approve_ms.append((time.time() - asked) * 1000)
            started = wait_for(
                lambda n=number: (
                    Iteration.objects.filter(run=run, number=n + 1, started_at__isnull=False)
                    .values_list("started_at", flat=True)
                    .first()
                )
            )
            latencies.append((started.timestamp() - asked) * 1000)
        services.cancel_run(run, Actor("console"), reason="benchmark done")
        figures = {
            "gates": options.gates,
            "worker_processes": options.concurrency,
            "p50_ms": median(latencies),
            "p95_ms": percentile(latencies, 95),
            "max_ms": max(latencies),
            "min_ms": min(latencies),
            "target": "p95 <= 25 ms",
            "approve_call_p50_ms": median(approve_ms),
            "approve_call_p95_ms": percentile(approve_ms, 95),
            "latencies_ms": latencies,
        }
        bench.report(
            "gate_latency",
            f"Approve -> next iteration started, over {options.gates} gates",
            ["p50 ms", "p95 ms", "min ms", "max ms", "approve() p50 ms", "target"],
            [
                [
                    figures["p50_ms"],
                    figures["p95_ms"],
                    figures["min_ms"],
                    figures["max_ms"],
                    figures["approve_call_p50_ms"],
                    "p95 <= 25",
                ]
            ],
            figures,
        )
    finally:
        bench.close()


if __name__ == "__main__":
    main()
