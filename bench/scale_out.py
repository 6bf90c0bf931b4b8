"""Scale-out: many concurrent runs on one worker, then on two.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/scale_out.py [--runs 100] [--iterations 20] [--concurrency 1]

RUNS runs of a loop of ITERATIONS iterations (an agent that takes AGENT_MS per iteration,
the demo provider with a per-word delay) are started at once, first with one worker, then
with two (each worker has CONCURRENCY processes). Reports the wall time, iterations per
second and the speed-up, and checks that no iteration was lost or recorded twice.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.harness import Bench, make_recipe, wait_runs  # noqa: E402

RECIPE = """
name: scale-loop
providers:
  agent: {{kind: demo, delay: {delay}, complete_after: {iterations}}}
nodes:
  - id: work
    provider: agent
    loop:
      prompt: "Take the next step. When all steps are done, output: COMPLETE"
      until: COMPLETE
      max_iterations: {iterations}
"""


def check(runs, iterations: int) -> dict:
    """Every run completed, with iterations 1..N each recorded and completed exactly once."""
    from runs.models import Iteration, Run, RunEvent

    ids = [run.pk for run in runs]
    statuses = Counter(Run.objects.filter(pk__in=ids).values_list("status", flat=True))
    rows = Counter(
        Iteration.objects.filter(run_id__in=ids).values_list("run_id", "number", "status")
    )
    completions = Counter(
        (e["run_id"], e["data"]["iteration"])
        for e in RunEvent.objects.filter(run_id__in=ids, kind="iteration_completed").values(
            "run_id", "data"
        )
    )
    expected = {(run_id, n) for run_id in ids for n in range(1, iterations + 1)}
    completed = {(r, n) for (r, n, s), c in rows.items() if s == "completed"}
    return {
        "statuses": dict(statuses),
        "lost": len(expected - completed),
        "duplicate_rows": sum(c - 1 for c in rows.values() if c > 1),
        "duplicate_completions": sum(c - 1 for c in completions.values() if c > 1),
        "extra": len(completed - expected),
    }


def one_round(bench, recipe, workers: int, options) -> dict:
    from runs import services

    for _ in range(workers):
        bench.start_worker(concurrency=options.concurrency)
    started = time.monotonic()
    runs = [services.start_run(recipe, message=f"run {n}") for n in range(options.runs)]
    wait_runs(runs, timeout=1800, interval=0.05)
    elapsed = time.monotonic() - started
    bench.stop_workers()
    total = options.runs * options.iterations
    return {
        "workers": workers,
        "seconds": elapsed,
        "iterations_per_second": total / elapsed,
        "check": check(runs, options.iterations),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=1, help="processes per worker")
    parser.add_argument("--agent-delay", type=float, default=0.002, help="seconds per word")
    options = parser.parse_args()
    bench = Bench.open("bench_scale")
    try:
        recipe = make_recipe(
            RECIPE.format(delay=options.agent_delay, iterations=options.iterations), "scale-loop"
        )
        one = one_round(bench, recipe, 1, options)
        two = one_round(bench, recipe, 2, options)
        speedup = one["seconds"] / two["seconds"]
        rows = [
            [
                r["workers"],
                options.concurrency,
                r["seconds"],
                r["iterations_per_second"],
                r["check"]["lost"],
                r["check"]["duplicate_rows"] + r["check"]["duplicate_completions"],
                ", ".join(f"{k} {v}" for k, v in r["check"]["statuses"].items()),
            ]
            for r in (one, two)
        ]
        bench.report(
            "scale_out",
            f"{options.runs} runs x {options.iterations} iterations; speed-up {speedup:.2f}x",
            ["workers", "procs each", "seconds", "iter/s", "lost", "duplicates", "runs"],
            rows,
            {"options": vars(options), "one_worker": one, "two_workers": two, "speedup": speedup},
        )
        if any(r["check"]["lost"] or r["check"]["duplicate_rows"] for r in (one, two)):
            sys.exit("lost or duplicate iterations")
    finally:
        bench.close()


if __name__ == "__main__":
    main()
