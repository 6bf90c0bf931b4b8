"""Pages at scale: the runs list over 100,000 runs, a run page with 1,000 iterations, the
loops list over 20,000 driven loops and a loop of 500 iterations.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/pages_at_scale.py [--runs 100000] [--iterations 1000] \\
        [--loops 20000] [--loop-iterations 500]

Seeds the scratch database with bulk_create, then requests each page REPEAT times through
django.test.Client as a signed-in operator and reports the server time (the whole request
through middleware, view and template) and the number of queries. Query counts are also
taken on a small database, to show they do not grow with the data.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.harness import Bench, make_recipe, median, percentile

RECIPE = """
name: seeded-loop
providers:
  agent: {kind: demo, delay: 0}
nodes:
  - id: work
    provider: agent
    loop:
      prompt: "Take the next step. When all steps are done, output: COMPLETE"
      until: COMPLETE
      max_iterations: 5000
"""
STATUSES = ["completed", "failed", "running", "paused", "cancelled", "completed", "completed"]
OUTPUT = "Demo agent: iteration {n}.\nChanged three files; the tests now say {n} passing.\n"


def seed_runs(recipe, count: int, batch: int = 5000) -> None:
    from django.utils import timezone

    from runs.models import Run

    now = timezone.now()
    made = 0
    while made < count:
        size = min(batch, count - made)
        Run.objects.bulk_create(
            Run(
                recipe=recipe,
                recipe_version=recipe.current_version,
                message=f"seeded run {made + i}",
                status=STATUSES[(made + i) % len(STATUSES)],
                created_at=now,
                started_at=now,
            )
            for i in range(size)
        )
        made += size


def seed_long_run(recipe, iterations: int):
    from django.utils import timezone

    from runs.models import Iteration, NodeRun, Run, RunEvent

    now = timezone.now()
    run = Run.objects.create(
        recipe=recipe,
        recipe_version=recipe.current_version,
        message="a long loop",
        status="running",
        started_at=now,
    )
    row = NodeRun.objects.create(
        run=run,
        node_id="work",
        kind="loop",
        status="running",
        iteration_count=iterations,
        max_iterations=5000,
        started_at=now,
    )
    Iteration.objects.bulk_create(
        Iteration(
            run=run,
            node_run=row,
            node_id="work",
            number=n,
            status="completed",
            prompt="Take the next step.",
            raw_output=OUTPUT.format(n=n),
            output=OUTPUT.format(n=n),
            attempts=1,
            started_at=now,
            finished_at=now,
            duration_ms=1200,
        )
        for n in range(1, iterations + 1)
    )
    kinds = ["iteration_queued", "iteration_started", "iteration_completed"]
    RunEvent.objects.bulk_create(
        RunEvent(run=run, seq=i + 1, kind=kinds[i % 3], step="work", data={"iteration": i // 3 + 1})
        for i in range(iterations * 3)
    )
    run.last_seq = iterations * 3
    run.save(update_fields=["last_seq"])
    return run


DRIVEN = """
kind: driven
name: seeded-driven
provider: demo
agents:
  drafter: {instructions: Draft it.}
  host:
    instructions: Drive it.
    loop: {pool: [drafter], max_iterations: 500}
host: host
"""
LOOP_STATUSES = ["completed", "exhausted", "failed", "completed"]


def seed_loops(recipe, count: int, iterations: int, batch: int = 5000):
    """A driven run with `count` loops (two iterations each), and a loop of `iterations`
    iterations of one drafter step each. Returns (run, the long loop)."""
    from django.utils import timezone

    from loops.driven.models import Loop, LoopIteration
    from runs.models import Iteration, NodeRun, Run

    now = timezone.now()
    run = Run.objects.create(
        recipe=recipe, recipe_version=recipe.current_version, status="running", started_at=now
    )
    host = NodeRun.objects.create(run=run, node_id="host", kind="driven", status="running")
    drafter = NodeRun.objects.create(run=run, node_id="drafter", kind="agent", status="running")
    turn = Iteration.objects.create(run=run, node_run=host, node_id="host", number=1)
    made = 0
    while made < count:
        size = min(batch, count - made)
        loops = Loop.objects.bulk_create(
            Loop(
                run=run,
                host_iteration=turn,
                agent="host",
                pipeline=["drafter"],
                input="seeded",
                max_iterations=500,
                status=LOOP_STATUSES[(made + i) % len(LOOP_STATUSES)],
                iteration_count=2,
                result=f"draft of loop {made + i}",
                finished_at=now,
            )
            for i in range(size)
        )
        LoopIteration.objects.bulk_create(
            LoopIteration(loop=loop, number=n, status="completed", input="x", output=f"draft {n}")
            for loop in loops
            for n in (1, 2)
        )
        made += size
    steps = Iteration.objects.bulk_create(
        Iteration(
            run=run,
            node_run=drafter,
            node_id="drafter",
            number=n,
            status="completed",
            output=OUTPUT.format(n=n),
            started_at=now,
            duration_ms=900,
        )
        for n in range(1, iterations + 1)
    )
    long_loop = Loop.objects.create(
        run=run,
        host_iteration=turn,
        agent="host",
        pipeline=["drafter"],
        max_iterations=500,
        status="open",
        iteration_count=iterations,
    )
    LoopIteration.objects.bulk_create(
        LoopIteration(
            loop=long_loop,
            number=n,
            status="completed",
            input={"previousOutput": f"draft {n - 1}", "feedback": "shorter"},
            feedback="shorter",
            output=OUTPUT.format(n=n),
            steps=[{"agent": "drafter", "iteration": step.pk, "attempt": 1}],
            duration_ms=900,
        )
        for n, step in enumerate(steps, start=1)
    )
    return run, long_loop


def measure(client, url: str, repeat: int) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    times, queries, status = [], 0, None
    for _ in range(repeat):
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - started) * 1000)
        status = response.status_code
        queries = len(captured.captured_queries)
    return {
        "url": url,
        "status": status,
        "p50_ms": median(times),
        "p95_ms": percentile(times, 95),
        "queries": queries,
    }


# Every page the bench requests: key, label, path (given the run with many iterations),
# target. The loops pages of the next loop kinds add their rows here.
PAGES = [
    (
        "inbox",
        "GET /?part=live, the inbox's refresh ({runs} runs)",
        lambda run: "/?part=live",
        "<= 100 ms",
    ),
    ("list", "GET /runs/ ({runs} runs)", lambda run: "/runs/", "<= 100 ms"),
    (
        "detail",
        "GET /runs/<id>/ ({iterations} iterations)",
        lambda run: f"/runs/{run.pk}/",
        "<= 150 ms",
    ),
]


def finished_plan() -> str:
    """How PostgreSQL reads the inbox's "recently finished" list (the index it uses)."""
    from django.db import connection

    from runs.models import Run

    query = (
        Run.objects.filter(status__in=sorted(Run.TERMINAL))
        .order_by("-finished_at", "-id")
        .values("id")[:15]
    )
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        return " / ".join(row[0].strip() for row in cursor.fetchall())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--loops", type=int, default=20_000)
    parser.add_argument("--loop-iterations", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=20)
    options = parser.parse_args()
    bench = Bench.open("bench_pages")
    try:
        from django.contrib.auth import get_user_model
        from django.test import Client

        from console.roles import ensure_roles

        ensure_roles()
        user = get_user_model().objects.create_superuser("bench", password="pw-bench-user")
        client = Client()
        client.force_login(user)
        recipe = make_recipe(RECIPE, "seeded-loop")

        driven = make_recipe(DRIVEN, "seeded-driven")

        def loop_pages(run, loop) -> dict:
            return {
                "loops": measure(client, "/loops/", repeat),
                "loop": measure(client, f"/loops/{loop.pk}/", repeat),
                "driven_run": measure(client, f"/runs/{run.pk}/", repeat),
            }

        small_run = seed_long_run(recipe, 10)
        seed_runs(recipe, 50)
        repeat = 3
        small = {key: measure(client, path(small_run), repeat) for key, _, path, _ in PAGES}
        small.update(loop_pages(*seed_loops(driven, 20, 10)))
        started = time.monotonic()
        long_run = seed_long_run(recipe, options.iterations)
        seed_runs(recipe, options.runs)
        driven_run, long_loop = seed_loops(driven, options.loops, options.loop_iterations)
        seeded = time.monotonic() - started
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        repeat = options.repeat
        large = {key: measure(client, path(long_run), repeat) for key, _, path, _ in PAGES}
        large.update(loop_pages(driven_run, long_loop))
        large["inbox_finished_plan"] = finished_plan()
        rows = [
            [
                label.format(runs=f"{options.runs:,}", iterations=f"{options.iterations:,}"),
                large[key]["status"],
                large[key]["p50_ms"],
                large[key]["p95_ms"],
                large[key]["queries"],
                small[key]["queries"],
                target,
            ]
            for key, label, _, target in [
                *PAGES,
                ("loops", f"GET /loops/ ({options.loops:,} loops)", None, "<= 100 ms"),
                (
                    "loop",
                    f"GET /loops/<id>/ ({options.loop_iterations:,} iterations)",
                    None,
                    "<= 400 ms",
                ),
                ("driven_run", "GET /runs/<id>/ (a driven run of those loops)", None, "<= 150 ms"),
            ]
        ]
        print("inbox 'recently finished' plan:", large["inbox_finished_plan"])
        bench.report(
            "pages_at_scale",
            f"Server time over {options.repeat} requests (seeding took {seeded:.0f}s)",
            ["page", "status", "p50 ms", "p95 ms", "queries", "queries (small db)", "target"],
            rows,
            {"options": vars(options), "large": large, "small": small, "seed_seconds": seeded},
        )
    finally:
        bench.close()


if __name__ == "__main__":
    main()
