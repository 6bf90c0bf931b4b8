"""A chaos soak across the four loop kinds: runs keep starting while workers are killed
(whole, or one pool child), the database's sessions are terminated and a private Redis is
killed and restarted; then nobody touches the runs but the sweep (which beat would run)
and a person approving gates. Prints what happened to every run and fault.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/soak_faults.py [--runs 100] [--faults 100] [--workers 3]

REDIS_URL only satisfies the harness: the soak starts a redis-server of its own on a free
port (it is the one killed) and a scratch database (BENCH_DB, else `soak_faults_<pid>`).
Agents are the demo provider (LOOP_DEMO_DELAY per word), without the sandbox as in the
fault suite. Exits non-zero when a run did not end (or wait for a person) by itself, left a
row running or recorded an iteration twice, or a worker exited by itself (replaced).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOT = Path(__file__).resolve().parent.parent

STEPS = """
schema: planeai.loop.recipe.v1
id: soak-steps
name: Make, check, ask
roles:
  maker: {provider: demo, mode: write, isolation: project}
  checker: {provider: demo, mode: review, isolation: readonly}
steps:
  - {id: make, kind: session.create, role: maker, prompt: Make the change.}
  - {id: wait_make, kind: handoff.wait, from: maker, on: {completed: check}}
  - {id: check, kind: session.create, role: checker, prompt: Check the change.}
  - {id: wait_check, kind: handoff.wait, from: checker, on: {completed: polish}}
  - {id: polish, kind: session.prompt, role: maker, select: latest, prompt: Polish it.}
  - {id: wait_polish, kind: handoff.wait, from: maker, on: {completed: ask}}
  - {id: ask, kind: human.wait, prompt: "Ship it?"}
  - {id: done, kind: loop.status, status: approved}
"""

PYTHON = '''"""Soak writer and reviewer"""
from pydantic import BaseModel

from loops.python import Agent, LoopWorkflow, score_at_least


class Review(BaseModel):
    content: str
    score: int
    feedback: str


workflow = LoopWorkflow(
    [
        Agent("writer", "Write.", provider="demo"),
        Agent("reviewer", "Score it.", provider="demo", output_type=Review),
    ],
    stop_condition=score_at_least("score", 80),
    max_iterations=5,GATE
)
'''

GOOD = {"completed", "approved"}
KINDS = ("workflow", "driven", "python", "step machine")


class Soak:
    def __init__(self, args):
        self.args = args
        self.folder = Path(tempfile.mkdtemp(prefix="loop-soak-"))
        from bench.harness import PrivateRedis

        self.redis = PrivateRedis(self.folder)
        self.redis.start()
        os.environ["REDIS_URL"] = self.redis.url
        os.environ.pop("CELERY_BROKER_URL", None)
        from bench.harness import Bench

        self.bench = Bench.open(
            "soak_faults",
            LOOP_LEASE_SECONDS=str(args.lease),
            LOOP_STALE_PENDING_SECONDS=str(args.lease),
            LOOP_SANDBOX="off",
            LOOP_DEMO_DELAY=str(args.delay),
            LOG_LEVEL="WARNING",
        )
        self.workers: list = []  # [proc, log path, replaced]
        self.faults: Counter = Counter()
        self.exited_by_themselves = 0
        self.sweep_errors = 0
        self.runs: dict[int, str] = {}  # run id -> kind
        self.rng = random.Random(args.seed)
        self.redis_back_at: float | None = None

    # --- workers ---------------------------------------------------------------------

    def start_worker(self) -> None:
        self.bench.start_worker(self.args.concurrency)
        self.workers.append(self.bench.workers[-1])

    def supervise(self) -> None:
        """A worker that exited by itself (not killed here) is counted and replaced, as
        `manage.py serve` or systemd would."""
        for proc, log in list(self.workers):
            if proc.poll() is not None:
                self.exited_by_themselves += 1
                print(f"  a worker exited by itself ({log.name}): {tail(log)}", flush=True)
                self.workers.remove((proc, log))
                self.start_worker()

    # --- faults ----------------------------------------------------------------------

    def fault(self) -> None:
        if self.redis_back_at is not None:  # Redis is down: a new worker could not start
            kind = self.rng.choice(["pool child", "database"])
        else:
            kind = self.rng.choice(["worker", "pool child", "database", "redis"])
        if kind == "worker":
            proc, log = self.rng.choice(self.workers)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            self.workers.remove((proc, log))
            self.start_worker()
        elif kind == "pool child":
            proc, _ = self.rng.choice(self.workers)
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            if not children:
                return
            os.kill(int(self.rng.choice(children)), signal.SIGKILL)
        elif kind == "database":
            from django.db import connection

            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
        else:
            # Down for a few seconds while runs start, gates are decided and work ends:
            # every message sent meanwhile is lost.
            self.redis.kill()
            self.redis_back_at = time.monotonic() + self.rng.uniform(4, 8)
        self.faults[kind] += 1

    def redis_back(self) -> None:
        if self.redis_back_at is not None and time.monotonic() >= self.redis_back_at:
            self.redis.start()
            self.redis_back_at = None

    # --- runs ------------------------------------------------------------------------

    def recipes(self) -> dict:
        from bench.harness import make_recipe
        from recipes.editing import create_recipe
        from recipes.models import Recipe

        made = {
            "workflow": make_recipe(
                (ROOT / "recipes/builtin/counter-loop.yaml").read_text(), "soak-loop"
            ),
            "driven": make_recipe(
                (ROOT / "recipes/builtin/launch-note.yaml").read_text(), "soak-driven"
            ),
            "step machine": make_recipe(STEPS, "soak-steps"),
        }
        for gate in (False, True):
            slug = "soak-python-gated" if gate else "soak-python"
            source = PYTHON.replace("GATE", "\n    gate=True," if gate else "")
            path = self.folder / f"{slug.replace('-', '_')}.py"
            path.write_text(source)
            made[slug], _ = create_recipe(
                source, slug=slug, origin=Recipe.Origin.PROJECT, source_path=str(path)
            )
        return made

    def start_run(self, recipes: dict, number: int) -> None:
        from runs import services
        from runs.actor import ENGINE

        kind = KINDS[number % len(KINDS)]
        if kind == "python":
            recipe = recipes["soak-python-gated" if number % 8 == 2 else "soak-python"]
        else:
            recipe = recipes[kind]
        run = services.start_run(recipe, actor=ENGINE, message=f"soak run {number}")
        self.runs[run.pk] = kind

    def approve_gates(self) -> None:
        """A person at the inbox: decides each gate a second after it opened (a Python
        loop's first gate with feedback, so it iterates; every other one accepts)."""
        from datetime import timedelta

        from django.utils import timezone

        from runs import services
        from runs.actor import Actor
        from runs.errors import ServiceError
        from runs.models import Gate

        due = timezone.now() - timedelta(seconds=1)
        for gate in Gate.objects.filter(
            run_id__in=list(self.runs), status="pending", created_at__lt=due
        ).select_related("iteration"):
            comment = "more punch" if gate.iteration and gate.iteration.number == 1 else ""
            try:
                services.approve(gate.pk, Actor("cli", label="soak approver"), comment=comment)
            except ServiceError:
                pass

    def sweep(self) -> None:
        from runs.executor.sweep import sweep

        try:
            sweep()
        except Exception:  # noqa: BLE001 - the broker or the database out of reach: next pass
            self.sweep_errors += 1
            from django.db import connection

            connection.close()

    def tend(self) -> None:
        """What runs beside the runs: the sweep (beat's job), a person deciding gates,
        a supervisor replacing a worker that exited by itself."""
        self.redis_back()
        if self.redis_back_at is None:
            self.supervise()
        try:
            self.approve_gates()
        except Exception:  # noqa: BLE001 - the database dropped us: next time
            from django.db import connection

            connection.close()
        self.sweep()

    # --- the soak ----------------------------------------------------------------------

    def run(self) -> int:
        args = self.args
        for _ in range(args.workers):
            self.start_worker()
        recipes = self.recipes()
        started_at = time.monotonic()
        next_fault = next_start = time.monotonic()
        started = 0
        print(f"soak: {args.runs} runs, {args.faults} faults, {args.workers} workers", flush=True)
        while started < args.runs or sum(self.faults.values()) < args.faults:
            now = time.monotonic()
            if started < args.runs and now >= next_start:
                try:
                    self.start_run(recipes, started)
                    started += 1
                except Exception as exc:  # noqa: BLE001 - the database dropped us: again
                    from django.db import connection

                    connection.close()
                    print(f"  start failed ({exc!r}); again", flush=True)
                next_start = now + args.start_every
            if sum(self.faults.values()) < args.faults and now >= next_fault:
                self.fault()
                next_fault = now + self.rng.uniform(args.fault_every / 2, args.fault_every * 1.5)
            self.tend()
            time.sleep(0.5)
        chaos_seconds = time.monotonic() - started_at
        print(f"chaos over after {chaos_seconds:.0f} s; settling", flush=True)
        deadline = time.monotonic() + args.settle
        while time.monotonic() < deadline and self.unsettled():
            self.tend()
            time.sleep(1)
        return self.report(chaos_seconds)

    def unsettled(self) -> list[int]:
        from loops.stepmachine.machine import STOPPING_STATUSES
        from runs.models import Run

        try:
            return list(
                Run.objects.filter(pk__in=list(self.runs))
                .exclude(status__in=Run.TERMINAL)
                .exclude(phase__in=STOPPING_STATUSES)  # a step machine stopped for a person
                .values_list("pk", flat=True)
            )
        except Exception:  # noqa: BLE001
            from django.db import connection

            connection.close()
            return [0]

    def report(self, chaos_seconds: float) -> int:
        from loops.stepmachine.machine import STOPPING_STATUSES
        from runs.models import Iteration, NodeRun, Run

        rows = []
        problems = 0
        for kind in KINDS:
            ids = [pk for pk, k in self.runs.items() if k == kind]
            runs = Run.objects.filter(pk__in=ids)
            # What each run shows: a step machine's phase (approved, blocked), else its status.
            statuses = Counter(p or s for s, p in runs.values_list("status", "phase"))
            good = sum(statuses[s] for s in GOOD)
            failed = statuses["failed"]
            waiting = sum(statuses[s] for s in STOPPING_STATUSES)
            ended = runs.filter(status__in=Run.TERMINAL)
            unfinished = len(ids) - ended.count() - waiting
            left_running = NodeRun.objects.filter(run__in=ended, status="running").count()
            left_running += Iteration.objects.filter(
                run__in=ended, status__in=["pending", "running"]
            ).count()
            twice = duplicates(ids)
            re_run = Iteration.objects.filter(run_id__in=ids, attempts__gt=1).count()
            rows.append(
                [kind, len(ids), good, failed, waiting, unfinished, left_running, twice, re_run]
            )
            problems += unfinished + left_running + twice + failed
            for run in runs.filter(status="failed")[:5]:
                print(f"  {kind} run {run.pk} failed: {run.error[:200]}")
        self.bench.report(
            "soak_faults",
            f"Soak: {len(self.runs)} runs, {sum(self.faults.values())} faults in "
            f"{chaos_seconds:.0f} s ({', '.join(f'{v} {k}' for k, v in self.faults.items())})",
            [
                "kind",
                "runs",
                "completed",
                "failed",
                "waiting on a person",
                "not finished",
                "rows left running",
                "recorded twice",
                "iterations re-run",
            ],
            rows,
            {
                "faults": dict(self.faults),
                "workers exited by themselves": self.exited_by_themselves,
                "sweep passes that raised": self.sweep_errors,
                "rows": rows,
            },
        )
        print(f"workers that exited by themselves: {self.exited_by_themselves}")
        print(f"sweep passes that raised (the broker or the database away): {self.sweep_errors}")
        return 1 if problems or self.exited_by_themselves else 0

    def close(self) -> None:
        self.bench.close()
        if self.redis.proc and self.redis.proc.poll() is None:
            self.redis.kill()
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)


def duplicates(run_ids: list[int]) -> int:
    """Iterations with two rows, or two `iteration_completed` events, for one number."""
    from runs.models import Iteration, RunEvent

    rows = Counter(
        Iteration.objects.filter(run_id__in=run_ids).values_list(
            "run_id", "node_id", "generation", "number"
        )
    )
    completed = Counter(
        (e.run_id, e.step, e.data.get("iteration"))
        for e in RunEvent.objects.filter(run_id__in=run_ids, kind="iteration_completed")
    )
    return sum(1 for c in rows.values() if c > 1) + sum(1 for c in completed.values() if c > 1)


def tail(log: Path) -> str:
    lines = log.read_text(errors="replace").strip().splitlines()
    return lines[-1][:200] if lines else "(empty log)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--faults", type=int, default=100)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--start-every", type=float, default=2.0, help="seconds between starts")
    parser.add_argument("--fault-every", type=float, default=2.5, help="mean seconds")
    parser.add_argument("--lease", type=int, default=4, help="LOOP_LEASE_SECONDS")
    parser.add_argument("--delay", type=float, default=0.02, help="LOOP_DEMO_DELAY")
    parser.add_argument("--settle", type=float, default=600, help="seconds after the chaos")
    parser.add_argument("--seed", type=int, default=29)
    # Stopped early (timeout, kill PID): still stop the workers and Redis it started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    soak = Soak(parser.parse_args())
    try:
        return soak.run()
    finally:
        soak.close()


if __name__ == "__main__":
    sys.exit(main())
