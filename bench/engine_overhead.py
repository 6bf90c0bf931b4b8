"""Engine overhead per iteration, against two floors on the same broker and database.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/engine_overhead.py [--steps 500] [--rounds 3]

Three chains of STEPS steps through one real worker (concurrency 2):
- noop:        a raw Celery chain, each task sends the next;
- transaction: the same, but each step commits one transaction of two writes first;
- engine:      a `loop` node of STEPS iterations with an instant in-process agent
               (the demo provider with delay 0), until COMPLETE on the last one.
Per step = wall time from sending the first task to the end of the last / STEPS. The
median of ROUNDS rounds is reported. Then, in this process, the database queries one
iteration costs (the engine's own bookkeeping, which is what the ratio measures).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.harness import Bench, make_recipe, median, wait_runs  # noqa: E402

RECIPE = """
name: instant-loop
providers:
  instant: {{kind: demo, delay: 0, complete_after: {steps}}}
nodes:
  - id: work
    provider: instant
    loop:
      prompt: "Take the next step. When all steps are done, output: COMPLETE"
      until: COMPLETE
      max_iterations: {steps}
"""


def wait_key(client, key: str, timeout: float = 600) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = client.get(key)
        if value is not None:
            return float(value)
        time.sleep(0.002)
    sys.exit(f"chain {key} did not finish")


def noop_chain(client, steps: int) -> float:
    from bench.floor_tasks import noop_step

    key = f"bench:bench_loop:noop:{uuid.uuid4().hex}"
    started = time.time()
    noop_step.delay(steps, key)
    return (wait_key(client, key) - started) / steps


def transaction_chain(client, recipe, steps: int) -> float:
    from bench.floor_tasks import transaction_step
    from runs.models import Run

    run = Run.objects.create(recipe=recipe, recipe_version=recipe.current_version)
    key = f"bench:bench_loop:tx:{uuid.uuid4().hex}"
    started = time.time()
    transaction_step.delay(steps, key, run.pk)
    return (wait_key(client, key) - started) / steps


def engine_loop(recipe, steps: int) -> tuple[float, float]:
    from runs import services
    from runs.models import Iteration

    started = time.time()
    run = services.start_run(recipe, message="overhead")
    wait_runs([run])
    run.refresh_from_db()
    if run.status != "completed":
        sys.exit(f"engine run failed: {run.error}")
    total = (run.finished_at.timestamp() - started) / steps
    its = Iteration.objects.filter(run=run).order_by("number")
    first, last = its.first(), its.last()
    between = (last.finished_at - first.started_at).total_seconds() / max(1, steps - 1)
    return total, between


def queries_per_iteration(recipe, samples: int = 20) -> dict:
    """Run iterations in this process and count their queries (nothing is sent)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from runs import services, tasks
    from runs.executor import scheduler, state
    from runs.models import Iteration

    sent: list = []
    original = state.enqueue
    state.enqueue = services.enqueue = lambda name, *args: sent.append((name, args))
    scheduler.enqueue = state.enqueue
    try:
        run = services.start_run(recipe, message="count queries")
        tasks.advance_run(run.pk)
        node_id = next(args[0] for name, args in sent if name == "start_node")
        tasks.start_node(node_id)
        counts = []
        for _ in range(samples):
            it = Iteration.objects.filter(run=run, status="pending").get()
            with CaptureQueriesContext(connection) as captured:
                tasks.run_iteration(it.pk)
            counts.append(len(captured.captured_queries))
        kinds: dict[str, int] = {}
        for query in captured.captured_queries:
            verb = query["sql"].split(None, 1)[0].upper()
            kinds[verb] = kinds.get(verb, 0) + 1
        return {"per_iteration": median(counts), "last_by_verb": kinds}
    finally:
        state.enqueue = services.enqueue = scheduler.enqueue = original


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    bench = Bench.open("bench_loop")
    try:
        import redis

        client = redis.Redis.from_url(os.environ["REDIS_URL"])
        recipe = make_recipe(RECIPE.format(steps=options.steps), "instant-loop")
        warm = make_recipe(RECIPE.format(steps=20), "instant-warmup")
        bench.start_worker(concurrency=2)
        noop_chain(client, 50), transaction_chain(client, recipe, 50), engine_loop(warm, 20)
        noop, tx, engine, inner = [], [], [], []
        for _ in range(options.rounds):
            noop.append(noop_chain(client, options.steps))
            tx.append(transaction_chain(client, recipe, options.steps))
            total, between = engine_loop(recipe, options.steps)
            engine.append(total)
            inner.append(between)
        bench.stop_workers()
        queries = queries_per_iteration(warm)
        ms = {
            "noop": median(noop) * 1000,
            "transaction": median(tx) * 1000,
            "engine": median(engine) * 1000,
            "engine_between_iterations": median(inner) * 1000,
        }
        rows = [
            ["raw chain, no-op", ms["noop"], 1.0, ms["noop"] / ms["transaction"]],
            [
                "raw chain, 1 transaction / 2 writes",
                ms["transaction"],
                ms["transaction"] / ms["noop"],
                1.0,
            ],
            [
                "engine loop iteration",
                ms["engine"],
                ms["engine"] / ms["noop"],
                ms["engine"] / ms["transaction"],
            ],
        ]
        bench.report(
            "engine_overhead",
            f"Per-step cost over {options.steps} steps (median of {options.rounds} rounds); "
            f"engine queries per iteration: {queries['per_iteration']}",
            ["chain", "ms/step", "x no-op", "x transaction"],
            rows,
            {
                "steps": options.steps,
                "rounds": options.rounds,
                "ms_per_step": ms,
                "rounds_ms": {
                    "noop": [v * 1000 for v in noop],
                    "transaction": [v * 1000 for v in tx],
                    "engine": [v * 1000 for v in engine],
                },
                "engine_vs_transaction": ms["engine"] / ms["transaction"],
                "engine_vs_noop": ms["engine"] / ms["noop"],
                "target": "engine <= 2x transaction",
                "queries": queries,
            },
        )
    finally:
        bench.close()


if __name__ == "__main__":
    main()
