"""Engine overhead per iteration, against honest floors, all in one run.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/engine_overhead.py [--steps 300] [--rounds 3] [--modes close,reuse,pool]

Chains of STEPS steps through one real worker (concurrency 2), each task sending the next:
- noop:   a raw Celery chain;
- raw tx: each step commits one transaction of two writes (a counter update and an event
          row) in plain SQL over ONE persistent psycopg connection — the floor to beat;
- ORM tx: the same two writes through the Django ORM, as the worker's connections are
          configured by the mode;
- engine: a `loop` node of STEPS iterations with an instant in-process agent (the demo
          provider with delay 0), until COMPLETE on the last one.
The worker is restarted for each mode of keeping database connections between tasks:
- close: Celery's default (LOOP_WORKER_DB_REUSE_MAX=0): every task opens a new connection;
- reuse: the console's default, CELERY_DB_REUSE_MAX (connections kept, checked only after
         an error);
- pool:  psycopg's pool through Django's OPTIONS["pool"], Celery closing after each task.
Per step = wall time from sending the first task to the end of the last / STEPS; median of
ROUNDS rounds, floors and engine interleaved within each round, so every ratio compares
figures taken side by side. Then, in this process, the queries of iteration 1 and of
iteration 1,000 of one run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.harness import Bench, make_recipe, median, wait_runs

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


def transaction_chain(client, recipe, steps: int, raw: bool = False) -> float:
    from bench.floor_tasks import raw_transaction_step, transaction_step
    from runs.models import Run

    run = Run.objects.create(recipe=recipe, recipe_version=recipe.current_version)
    key = f"bench:bench_loop:tx:{uuid.uuid4().hex}"
    started = time.time()
    (raw_transaction_step if raw else transaction_step).delay(steps, key, run.pk)
    return (wait_key(client, key) - started) / steps


def engine_loop(recipe, steps: int) -> tuple[float, float]:
    from runs import services
    from runs.actor import ENGINE
    from runs.models import Iteration

    started = time.time()
    run = services.start_run(recipe, actor=ENGINE, message="overhead")
    wait_runs([run])
    run.refresh_from_db()
    if run.status != "completed":
        sys.exit(f"engine run failed: {run.error}")
    total = (run.finished_at.timestamp() - started) / steps
    its = Iteration.objects.filter(run=run).order_by("number")
    first, last = its.first(), its.last()
    between = (last.finished_at - first.started_at).total_seconds() / max(1, steps - 1)
    return total, between


MODES = {
    "close": {"LOOP_WORKER_DB_REUSE_MAX": "0"},
    "reuse": {},
    "pool": {"LOOP_WORKER_DB_REUSE_MAX": "0", "BENCH_DB_POOL": "1"},
}


def queries_per_iteration(recipe, at: tuple[int, ...] = (1, 2, 3, 1000), window: int = 20) -> dict:
    """Run one run's iterations in this process (nothing is sent) and count the queries
    of the iterations numbered `at` — iteration 1,000 shows whether the cost grows with
    the run's history — and time them: the median of the first `window` iterations
    against the median of the last `window` up to 1,000."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from runs import dispatch, services, tasks
    from runs.actor import ENGINE
    from runs.models import Iteration

    sent: list = []
    original = dispatch.deliver, dispatch.CHAIN_SECONDS
    dispatch.deliver = lambda name, *args: sent.append((name, args))
    dispatch.CHAIN_SECONDS = 0  # one iteration per call: count one iteration's queries
    last = max(at)
    try:
        run = services.start_run(recipe, actor=ENGINE, message="count queries")
        tasks.advance_run(run.pk)
        node_id = next(args[0] for name, args in sent if name == "start_node")
        tasks.start_node(node_id)
        counts, verbs, ms = {}, {}, {}
        for number in range(1, last + 1):
            it = Iteration.objects.filter(run=run, status="pending").get()
            started = time.perf_counter()
            if number not in at:
                tasks.run_iteration(it.pk)
                ms[number] = (time.perf_counter() - started) * 1000
                continue
            with CaptureQueriesContext(connection) as captured:
                tasks.run_iteration(it.pk)
            ms[number] = (time.perf_counter() - started) * 1000
            counts[number] = len(captured.captured_queries)
            kinds: dict[str, int] = {}
            for query in captured.captured_queries:
                verb = query["sql"].split(None, 1)[0].upper()
                kinds[verb] = kinds.get(verb, 0) + 1
            verbs[number] = kinds
        first = median([ms[n] for n in range(2, window + 2)])
        final = median([ms[n] for n in range(last - window + 1, last + 1)])
        # A busy machine's load drifts over the minutes the long run takes: a new run's
        # first iterations, timed right after the long run's last ones, are the control.
        fresh = services.start_run(recipe, actor=ENGINE, message="control")
        sent.clear()
        tasks.advance_run(fresh.pk)
        tasks.start_node(next(args[0] for name, args in sent if name == "start_node"))
        control = []
        for _ in range(window + 1):
            it = Iteration.objects.filter(run=fresh, status="pending").get()
            started = time.perf_counter()
            tasks.run_iteration(it.pk)
            control.append((time.perf_counter() - started) * 1000)
        return {
            "ms_control_window": median(control[1:]),
            "by_iteration": counts,
            "by_verb": verbs,
            "ms_first_window": first,
            "ms_last_window": final,
            "window": window,
        }
    finally:
        dispatch.deliver, dispatch.CHAIN_SECONDS = original


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default="close,reuse,pool")
    parser.add_argument(
        "--queries-only", action="store_true", help="only the in-process queries and times"
    )
    options = parser.parse_args()
    modes = [] if options.queries_only else options.modes.split(",")
    bench = Bench.open("bench_loop")
    try:
        import redis

        client = redis.Redis.from_url(os.environ["REDIS_URL"])
        recipe = make_recipe(RECIPE.format(steps=options.steps), "instant-loop")
        warm = make_recipe(RECIPE.format(steps=20), "instant-warmup")
        chains = ("noop", "raw", "orm", "engine")
        rounds = {mode: {chain: [] for chain in chains} for mode in modes}
        for mode in modes:
            bench.start_worker(concurrency=2, **MODES[mode])
            noop_chain(client, 50), transaction_chain(client, recipe, 50, raw=True)
            transaction_chain(client, recipe, 50), engine_loop(warm, 20)
            for _ in range(options.rounds):
                got = rounds[mode]
                got["noop"].append(noop_chain(client, options.steps) * 1000)
                got["raw"].append(transaction_chain(client, recipe, options.steps, True) * 1000)
                got["orm"].append(transaction_chain(client, recipe, options.steps) * 1000)
                got["engine"].append(engine_loop(recipe, options.steps)[0] * 1000)
            bench.stop_workers()
        queries = queries_per_iteration(make_recipe(RECIPE.format(steps=1001), "long-loop"))
        ms = {mode: {chain: median(v) for chain, v in got.items()} for mode, got in rounds.items()}
        rows = []
        labels = {
            "noop": "raw chain, no-op",
            "raw": "raw chain, 1 tx / 2 writes, persistent psycopg conn (floor)",
            "orm": "ORM chain, 1 tx / 2 writes",
            "engine": "engine loop iteration",
        }
        for mode in modes:
            m = ms[mode]
            for chain in chains:
                rows.append(
                    [
                        mode,
                        labels[chain],
                        m[chain],
                        m[chain] / m["noop"],
                        m[chain] / m["raw"],
                        m[chain] / m["orm"],
                    ]
                )
        by_iteration = queries["by_iteration"]
        bench.report(
            "engine_overhead",
            f"Per-step cost over {options.steps} steps (median of {options.rounds} rounds, "
            f"one run); engine queries at iterations {dict(by_iteration)}; in-process ms "
            f"per iteration, median of iterations 2-{queries['window'] + 1}: "
            f"{queries['ms_first_window']:.2f}, of the last {queries['window']} up to 1,000: "
            f"{queries['ms_last_window']:.2f}, of a new run's first {queries['window']} right "
            f"after: {queries['ms_control_window']:.2f}",
            ["worker conns", "chain", "ms/step", "x no-op", "x raw tx", "x ORM tx"],
            rows,
            {
                "steps": options.steps,
                "rounds": options.rounds,
                "ms_per_step": ms,
                "rounds_ms": rounds,
                "engine_vs_raw_floor": {
                    mode: ms[mode]["engine"] / ms[mode]["raw"] for mode in modes
                },
                "target": "engine <= 2x the persistent-connection transaction floor",
                "queries": queries,
            },
        )
    finally:
        bench.close()


if __name__ == "__main__":
    main()
