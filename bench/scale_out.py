"""Throughput: many concurrent runs on 1, 2 and 4 worker processes.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/scale_out.py [--runs 200] [--iterations 20] [--workers 1,2,4] \\
        [--agent-ms 0,50] [--concurrency 1]

RUNS runs of a loop of ITERATIONS iterations are started at once on each number of workers
(each with CONCURRENCY processes), for each agent: an instant one (the demo provider, no
delay) and one that takes about AGENT_MS per iteration (the demo provider's per-word delay,
set from the word count of an instant iteration). Reports the wall time, iterations per
second and the speed-up against one worker, and checks that no iteration was lost or
recorded twice (exits non-zero if one was).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.harness import Bench, make_recipe, wait_runs

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
    from runs.actor import ENGINE

    for _ in range(workers):
        bench.start_worker(concurrency=options.concurrency)
    started = time.monotonic()
    runs = [
        services.start_run(recipe, actor=ENGINE, message=f"run {n}") for n in range(options.runs)
    ]
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


def pieces_per_iteration(recipe) -> int:
    """How many chunks the demo agent writes per iteration (its delay is per chunk)."""
    import re

    from runs.models import Iteration

    output = Iteration.objects.filter(run__recipe=recipe).values_list("raw_output", flat=True)
    return max(1, len(re.findall(r"\S+\s*|\s+", output.first() or "")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--agent-ms", default="0,50", help="agent time per iteration")
    parser.add_argument("--concurrency", type=int, default=1, help="processes per worker")
    options = parser.parse_args()
    bench = Bench.open("bench_scale")
    results = []
    try:
        instant = None
        for agent_ms in [int(v) for v in options.agent_ms.split(",")]:
            delay = 0.0
            if agent_ms:
                if instant is None:
                    sys.exit("measure the instant agent first (--agent-ms 0,...)")
                delay = agent_ms / 1000 / pieces_per_iteration(instant)
            recipe = make_recipe(
                RECIPE.format(delay=delay, iterations=options.iterations), f"scale-{agent_ms}"
            )
            instant = instant or recipe
            base = None
            for workers in [int(v) for v in options.workers.split(",")]:
                result = one_round(bench, recipe, workers, options)
                base = base or result["seconds"]
                result.update(agent_ms=agent_ms, speedup=base / result["seconds"])
                results.append(result)
        rows = [
            [
                r["agent_ms"],
                r["workers"],
                options.concurrency,
                r["seconds"],
                r["iterations_per_second"],
                r["speedup"],
                r["check"]["lost"],
                r["check"]["duplicate_rows"] + r["check"]["duplicate_completions"],
                ", ".join(f"{k} {v}" for k, v in r["check"]["statuses"].items()),
            ]
            for r in results
        ]
        bench.report(
            "scale_out",
            f"{options.runs} runs x {options.iterations} iterations, all started at once",
            [
                "agent ms",
                "workers",
                "procs each",
                "seconds",
                "iter/s",
                "speed-up",
                "lost",
                "duplicates",
                "runs",
            ],
            rows,
            {"options": vars(options), "results": results},
        )
        if any(r["check"]["lost"] or r["check"]["duplicate_rows"] for r in results):
            sys.exit("lost or duplicate iterations")
    finally:
        bench.close()


if __name__ == "__main__":
    main()
