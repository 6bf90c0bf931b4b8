"""A chaos soak across the four loop kinds: runs keep starting while workers are killed
(whole, or one pool child), the database's sessions are terminated and a private Redis is
killed and restarted; then nobody touches the runs but the sweep (run here as beat would)
and a person approving gates. Prints what happened to every run and fault.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/soak_faults.py [--preset storm|paced] [--runs N] [--faults N]

A preset gives the other flags their defaults (a flag given wins; `--help` lists them):
- `storm` (the default): 100 runs and 100 faults of every class about every 2.5 s, demo
  agents at 0.02 s a word, LOOP_LEASE_SECONDS=4, the sweep every half second: the
  kernel's promises under many faults at once.
- `paced` (issue 42): for 30 minutes, runs of every kind keep starting (at most 5 in
  flight) while one process is killed (a whole worker or one pool child) every 20-60 s,
  ~40 s on average; demo agents at 0.25 s a word, so that a call takes 2-8 s (the demo's
  replies here are 8-30 words) and kills land on work in progress; LOOP_LEASE_SECONDS=10;
  the sweep at beat's own period (CELERY_BEAT_SCHEDULE, 15 s), so the recovery figure is
  the one a deployment sees. A worker also sends one sweep when its
  broker connection comes back (console/celery.py: SweepWhenTheBrokerReturns): that
  matters only with Redis outages, which this preset does not cause.

The sweep runs in a thread of the soak (`Beat`), so a killed worker's restart does not
hold it up, as it would not hold up beat.

REDIS_URL only satisfies the harness: the soak starts a redis-server of its own on a free
port (it is the one killed) and a scratch database (BENCH_DB, else `soak_faults_<pid>`).
Agents are the demo provider, without the sandbox as in the fault suite. LOOP_DEMO_DELAY
(`--delay`) is per word of a reply, so a call's length is its reply's words times the
delay: the report prints the calls' measured durations (completed iterations'
`duration_ms`, claim to end; a driven host's turns left out, as they hold their
pipeline's calls) and their words, per kind.

Recovery after a process kill, measured per kill. Just before it, the soak notes the
units in progress: NodeRun and Iteration rows `running` whose lease was renewed in the
last FRESH_SECONDS (a live holder renews it twice a second while it works). A unit was
struck by the kill when the sweep later took that same attempt back (`node_requeued` or
`iteration_requeued` with its attempt number; or failed it, "worker lost") - the proof
that its holder stopped renewing - and this kill is the last one that saw the attempt
alive. The struck unit's run has recovered at the first claim logged in it after the
take-back (`node_started` or `iteration_started`: the unit re-claimed, or the work after
it started); a kill's recovery is the time from the kill to the last of its struck runs'
recovery. A kill of an idle process struck nothing and is counted apart; work that holds
no lease (a step machine's tick message) is not measured here.

Exits non-zero when a run did not end (or wait for a person) by itself or failed, left a
row running, a driven loop open or a loop iteration running, recorded an iteration twice,
a struck unit never recovered, the recovery p90 was not under `--recovery-p90`, or a worker
exited by itself (replaced).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
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
# What --fault-kinds names, and the words the report uses.
FAULTS = {"worker": "worker", "pool-child": "pool child", "database": "database", "redis": "redis"}
# A unit whose lease was renewed this recently was held by a live process.
FRESH_SECONDS = 3.0
# The agent call length issue 42 asks the soak to run with.
CALL_SECONDS = (2.0, 8.0)
PRESETS = {
    "storm": {
        "runs": 100,
        "faults": 100,
        "minutes": None,
        "fault_every": 2.5,
        "fault_kinds": "worker,pool-child,database,redis",
        "lease": 4,
        "delay": 0.02,
        "sweep_every": 0.5,
        "in_flight": 0,
        "recovery_p90": None,
    },
    "paced": {
        "runs": None,
        "faults": None,
        "minutes": 30.0,
        "fault_every": 40.0,
        "fault_kinds": "worker,pool-child",
        "lease": 10,
        "delay": 0.25,
        "sweep_every": None,  # beat's period, read from the settings
        "in_flight": 5,
        "recovery_p90": 30.0,
    },
}


@dataclass
class Kill:
    """A process killed, and the units in progress just before: (model, run, node,
    iteration number, attempt) -> the row's id (None: the database was away)."""

    at: datetime
    kind: str
    held: dict | None


class Beat(threading.Thread):
    """The sweep every `period` seconds, as beat sends it; in a thread of its own, so a
    worker's restart in the soak's loop does not hold it up."""

    def __init__(self, period: float):
        super().__init__(name="soak-beat", daemon=True)
        self.period = period
        self.errors = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        from django.db import connection

        from runs.executor.sweep import sweep

        while not self.stopped.wait(self.period):
            try:
                sweep()
            except Exception:  # noqa: BLE001 - the broker or the database out of reach: next pass
                self.errors += 1
                connection.close()
        connection.close()

    def stop(self) -> None:
        self.stopped.set()
        self.join()


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
        if args.sweep_every is None:
            from django.conf import settings

            args.sweep_every = settings.CELERY_BEAT_SCHEDULE["sweep-expired-leases"]["schedule"]
        self.beat = Beat(args.sweep_every)
        self.workers: list = []  # [proc, log path, replaced]
        self.faults: Counter = Counter()
        self.kills: list[Kill] = []
        self.exited_by_themselves = 0
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
        kinds = self.args.fault_kinds
        if self.redis_back_at is not None:  # Redis is down: a new worker could not start
            kinds = [kind for kind in kinds if kind in ("pool child", "database")]
        if not kinds:
            return
        kind = self.rng.choice(kinds)
        if kind == "worker":
            self.kill_worker()
        elif kind == "pool child":
            if not self.kill_pool_child():
                return
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

    def kill_worker(self) -> None:
        proc, log = self.rng.choice(self.workers)
        self.note_kill("worker")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        self.workers.remove((proc, log))
        self.start_worker()

    def kill_pool_child(self) -> bool:
        proc, _ = self.rng.choice(self.workers)
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        if not children:
            return False
        child = int(self.rng.choice(children))
        self.note_kill("pool child")
        os.kill(child, signal.SIGKILL)
        return True

    def note_kill(self, kind: str) -> None:
        """The units in progress now, just before the kill (the module's docstring)."""
        from django.db import connection
        from django.utils import timezone

        from runs.executor.state import on_fresh_connection

        try:
            held = on_fresh_connection(held_units, list(self.runs), self.args.lease)
        except Exception:  # noqa: BLE001 - the database away: this kill goes unmeasured
            connection.close()
            held = None
        self.kills.append(Kill(at=timezone.now(), kind=kind, held=held))

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

    def tend(self) -> None:
        """What runs beside the runs: a person deciding gates and a supervisor replacing
        a worker that exited by itself (the sweep is the Beat thread's)."""
        self.redis_back()
        if self.redis_back_at is None:
            self.supervise()
        try:
            self.approve_gates()
        except Exception:  # noqa: BLE001 - the database dropped us: next time
            from django.db import connection

            connection.close()

    # --- the soak ----------------------------------------------------------------------

    def run(self) -> int:
        args = self.args
        for _ in range(args.workers):
            self.start_worker()
        recipes = self.recipes()
        self.beat.start()
        started_at = time.monotonic()
        next_start = time.monotonic()
        next_fault = next_start + self.fault_interval()  # not on workers still idle
        print(f"soak: {self.plan()}", flush=True)
        while not self.chaos_over(started_at):
            now = time.monotonic()
            if self.may_start(now >= next_start):
                self.start_next(recipes)
                next_start = now + args.start_every
            if self.faults_left() and now >= next_fault:
                self.fault()
                next_fault = now + self.fault_interval()
            self.tend()
            time.sleep(0.5)
        chaos_seconds = time.monotonic() - started_at
        print(f"chaos over after {chaos_seconds:.0f} s; settling", flush=True)
        deadline = time.monotonic() + args.settle
        while time.monotonic() < deadline and self.unsettled():
            self.tend()
            time.sleep(1)
        self.beat.stop()
        return self.report(chaos_seconds)

    def fault_interval(self) -> float:
        return self.rng.uniform(self.args.fault_every / 2, self.args.fault_every * 1.5)

    def plan(self) -> str:
        args = self.args
        until = [f"{args.minutes:g} min have passed"] if args.minutes else []
        if args.runs is not None and args.faults is not None:
            until.append(f"{args.runs} runs have started and {args.faults} faults happened")
        return (
            f"until {' or '.join(until)}; {', '.join(args.fault_kinds)} about every "
            f"{args.fault_every:g} s; {args.workers} workers of {args.concurrency}; "
            f"lease {args.lease} s; demo delay {args.delay:g} s a word; sweep every "
            f"{args.sweep_every:g} s"
            + (f"; at most {args.in_flight} runs in flight" if args.in_flight else "")
        )

    def chaos_over(self, since: float) -> bool:
        """The time is up (--minutes), or every run started and every fault done."""
        if self.args.minutes and time.monotonic() - since >= self.args.minutes * 60:
            return True
        return not self.runs_left() and not self.faults_left()

    def runs_left(self) -> bool:
        return self.args.runs is None or len(self.runs) < self.args.runs

    def faults_left(self) -> bool:
        return self.args.faults is None or sum(self.faults.values()) < self.args.faults

    def may_start(self, due: bool) -> bool:
        if not due or not self.runs_left():
            return False
        return not self.args.in_flight or len(self.unsettled()) < self.args.in_flight

    def start_next(self, recipes: dict) -> None:
        try:
            self.start_run(recipes, len(self.runs))
        except Exception as exc:  # noqa: BLE001 - the database dropped us: again
            from django.db import connection

            connection.close()
            print(f"  start failed ({exc!r}); again", flush=True)

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

    # --- the report --------------------------------------------------------------------

    def report(self, chaos_seconds: float) -> int:
        rows = [kind_row(kind, [pk for pk, k in self.runs.items() if k == kind]) for kind in KINDS]
        problems = sum(
            failed + unfinished + left_running + twice
            for _, _, _, failed, _, unfinished, left_running, twice, _ in rows
        )
        left_open = loops_left_open(list(self.runs))
        calls = call_durations(self.runs)
        recovered = recovery(self.kills, list(self.runs))
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
                "settings": dict(vars(self.args)),
                "faults": dict(self.faults),
                "workers exited by themselves": self.exited_by_themselves,
                "sweep passes that raised": self.beat.errors,
                "rows": rows,
                "driven loops left open": left_open,
                "agent calls": {kind: summary(values) for kind, values in calls.items()},
                "recovery": recovered,
            },
        )
        print(f"workers that exited by themselves: {self.exited_by_themselves}")
        print(f"sweep passes that raised (the broker or the database away): {self.beat.errors}")
        print_calls(calls)
        print(
            f"under finished runs: {left_open['loops']} driven loops left open, "
            f"{left_open['iterations']} loop iterations left running"
        )
        print_recovery(recovered, self.args.recovery_p90)
        problems += left_open["loops"] + left_open["iterations"] + recovered["not recovered"]
        if self.args.recovery_p90 is not None and recovered["p90"] >= self.args.recovery_p90:
            problems += 1
        return 1 if problems or self.exited_by_themselves else 0

    def close(self) -> None:
        if self.beat.is_alive():
            self.beat.stop()
        self.bench.close()
        if self.redis.proc and self.redis.proc.poll() is None:
            self.redis.kill()
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)


def kind_row(kind: str, ids: list[int]) -> list:
    """One line of the table: how the runs of `kind` ended, and what they left behind."""
    from loops.stepmachine.machine import STOPPING_STATUSES
    from runs.models import Iteration, NodeRun, Run

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
    for run in runs.filter(status="failed")[:5]:
        print(f"  {kind} run {run.pk} failed: {run.error[:200]}")
    return [kind, len(ids), good, failed, waiting, unfinished, left_running, twice, re_run]


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


def loops_left_open(run_ids: list[int]) -> dict:
    """A driven run that ended leaves no loop `open` and no loop iteration `running`."""
    from loops.driven.models import Loop, LoopIteration
    from runs.models import Run

    ended = Run.objects.filter(pk__in=run_ids, status__in=Run.TERMINAL)
    return {
        "loops": Loop.objects.filter(run__in=ended, status=Loop.Status.OPEN).count(),
        "iterations": LoopIteration.objects.filter(
            loop__run__in=ended, status=LoopIteration.Status.RUNNING
        ).count(),
    }


# --- agent calls ---------------------------------------------------------------------------


def call_durations(runs: dict[int, str]) -> dict[str, list[tuple[float, int]]]:
    """Per kind, each completed agent call's (seconds, words): its iteration's
    `duration_ms` (claim to end) and `tokens_out` (the demo's words, each one `--delay`).
    A driven host's turns are left out: they hold their pipeline's calls."""
    from loops.driven.format import KIND as DRIVEN_HOST
    from runs.models import Iteration

    calls = defaultdict(list)
    for run_id, ms, words in (
        Iteration.objects.filter(run_id__in=list(runs), status="completed")
        .exclude(duration_ms=None)
        .exclude(node_run__kind=DRIVEN_HOST)
        .values_list("run_id", "duration_ms", "tokens_out")
    ):
        calls[runs[run_id]].append((ms / 1000, words or 0))
    return calls


def summary(calls: list[tuple[float, int]]) -> dict:
    from bench.harness import median

    seconds = [s for s, _ in calls]
    words = [w for _, w in calls]
    low, high = CALL_SECONDS
    return {
        "calls": len(calls),
        "min": min(seconds, default=float("nan")),
        "median": median(seconds),
        "max": max(seconds, default=float("nan")),
        f"within {low:g}-{high:g} s": sum(1 for s in seconds if low <= s <= high),
        "words": f"{min(words, default=0)}-{max(words, default=0)}",
    }


def print_calls(calls: dict) -> None:
    low, high = CALL_SECONDS
    everything = [call for kind in KINDS for call in calls.get(kind, [])]
    print("agent calls (completed iterations, a driven host's turns aside), in seconds:")
    for kind, values in [*((kind, calls.get(kind, [])) for kind in KINDS), ("all", everything)]:
        got = summary(values)
        print(
            f"  {kind:<13} {got['calls']:>5} calls  min {got['min']:.1f}  median "
            f"{got['median']:.1f}  max {got['max']:.1f}  within {low:g}-{high:g} s: "
            f"{got[f'within {low:g}-{high:g} s']}  words {got['words']}"
        )


# --- recovery after a kill -------------------------------------------------------------------

TAKEN_BACK = {"node_requeued": "node", "iteration_requeued": "iteration"}
CLAIMS = ("node_started", "iteration_started")


def held_units(run_ids: list[int], lease: int) -> dict:
    """Rows in progress whose lease was renewed in the last FRESH_SECONDS, keyed the way
    the sweep's take-back events name them: (model, run, node, number, attempt) -> id."""
    from django.utils import timezone

    from runs.models import Iteration, NodeRun

    renewed_after = timezone.now() + timedelta(seconds=lease - FRESH_SECONDS)
    live = {"run_id__in": run_ids, "status": "running", "lease_expires_at__gte": renewed_after}
    held = {
        ("node", run, node, None, attempt): pk
        for pk, run, node, attempt in NodeRun.objects.filter(**live).values_list(
            "pk", "run_id", "node_id", "attempts"
        )
    }
    for pk, run, node, number, attempt in Iteration.objects.filter(**live).values_list(
        "pk", "run_id", "node_id", "number", "attempts"
    ):
        held[("iteration", run, node, number, attempt)] = pk
    return held


def recovery(kills: list[Kill], run_ids: list[int]) -> dict:
    """Each process kill's recovery time (the module's docstring says how it is measured)."""
    from bench.harness import median, percentile

    taken, claims = take_backs_and_claims(run_ids)
    struck, unexplained = struck_runs(kills, taken)
    each = []
    for i, kill in enumerate(kills):
        runs = struck.get(i, {})
        ends = [first_claim_after(claims[run], seq) for run, seq in runs.items()]
        seconds = None
        if runs and None not in ends:
            seconds = round((max(ends) - kill.at).total_seconds(), 1)
        each.append(
            {
                "at": kill.at.isoformat(),
                "kind": kill.kind,
                "units in progress": len(kill.held) if kill.held is not None else None,
                "runs struck": sorted(runs),
                "seconds": seconds,
            }
        )
    times = [kill["seconds"] for kill in each if kill["seconds"] is not None]
    return {
        "kills": len(kills),
        "struck work in progress": len(struck),
        "runs struck": sum(len(runs) for runs in struck.values()),
        "struck nothing": sum(1 for kill in each if kill["units in progress"] is not None)
        - len(struck),
        "not observed": sum(1 for kill in each if kill["units in progress"] is None),
        "not recovered": len(struck) - len(times),
        "taken back with no kill": unexplained,
        "p50": median(times),
        "p90": percentile(times, 90),
        "max": max(times, default=float("nan")),
        "each kill": each,
    }


def struck_runs(kills: list[Kill], taken: dict) -> tuple[dict, int]:
    """kill -> {run it struck: the seq of the run's last take-back, None when the sweep
    failed the unit instead}; and how many take-backs no kill explains (a lease that ran
    out under a live holder: one too slow to renew it)."""
    struck: dict[int, dict] = defaultdict(dict)
    unexplained = 0
    for key, (seq, at) in taken.items():
        killer = last_kill_holding(kills, key, before=at)
        if killer is None:
            unexplained += 1
            continue
        runs = struck[killer]
        runs[key[1]] = max(seq, runs.get(key[1], 0))
    for killer, run_id in lost_for_good(kills):
        struck[killer][run_id] = None
    return struck, unexplained


def take_backs_and_claims(run_ids: list[int]) -> tuple[dict, dict]:
    """The sweep's take-backs, (model, run, node, number, attempt) -> (seq, when), and
    each run's claims in order, run -> [(seq, when)]."""
    from runs.models import RunEvent

    taken, claims = {}, defaultdict(list)
    for run_id, seq, kind, step, data, at in (
        RunEvent.objects.filter(run_id__in=run_ids, kind__in=[*TAKEN_BACK, *CLAIMS])
        .order_by("run_id", "seq")
        .values_list("run_id", "seq", "kind", "step", "data", "created_at")
    ):
        if kind in CLAIMS:
            claims[run_id].append((seq, at))
            continue
        model = TAKEN_BACK[kind]
        number = data.get("iteration") if model == "iteration" else None
        taken[(model, run_id, step, number, data.get("attempts"))] = (seq, at)
    return taken, claims


def last_kill_holding(kills: list[Kill], key: tuple, before: datetime) -> int | None:
    seen = [i for i, kill in enumerate(kills) if kill.at < before and key in (kill.held or {})]
    return seen[-1] if seen else None


def lost_for_good(kills: list[Kill]) -> list[tuple[int, int]]:
    """(kill, run) for each attempt seen alive at a kill that the sweep then failed as
    "worker lost" (its count of lost workers reached LOOP_MAX_ATTEMPTS): the last kill
    that saw it alive struck it."""
    from runs.models import Iteration, NodeRun

    models = {"node": NodeRun, "iteration": Iteration}
    last_seen = {
        key: (i, pk) for i, kill in enumerate(kills) for key, pk in (kill.held or {}).items()
    }
    found = []
    for (model, run_id, _, _, attempt), (i, pk) in last_seen.items():
        lost = models[model].objects.filter(
            pk=pk, status="failed", attempts=attempt, error__startswith="worker lost"
        )
        if lost.exists():
            found.append((i, run_id))
    return found


def first_claim_after(claims: list[tuple[int, datetime]], seq: int | None) -> datetime | None:
    if seq is None:
        return None
    return next((at for claim_seq, at in claims if claim_seq > seq), None)


def print_recovery(got: dict, bar: float | None) -> None:
    print(
        f"recovery after a process kill (the kill to the struck runs' next claim): "
        f"{got['kills']} kills, {got['struck work in progress']} struck work in progress "
        f"({got['runs struck']} runs), {got['struck nothing']} struck nothing, "
        f"{got['not observed']} not observed (the database away); "
        f"p50 {got['p50']:.1f} s, p90 {got['p90']:.1f} s, max {got['max']:.1f} s"
        + (f" (bar: p90 under {bar:g} s)" if bar is not None else "")
    )
    print(
        f"  struck and never recovered: {got['not recovered']}; leases that ran out with "
        f"no kill: {got['taken back with no kill']}; each kill's seconds: "
        f"{sorted(kill['seconds'] for kill in got['each kill'] if kill['seconds'] is not None)}"
    )


def tail(log: Path) -> str:
    lines = log.read_text(errors="replace").strip().splitlines()
    return lines[-1][:200] if lines else "(empty log)"


# long: one flat list of the soak's options, read top to bottom
def arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="storm")
    parser.add_argument("--minutes", type=float, help="how long the chaos lasts")
    parser.add_argument("--runs", type=int, help="runs to start (at most, with --minutes)")
    parser.add_argument("--faults", type=int, help="faults to cause (at most, with --minutes)")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--start-every", type=float, default=2.0, help="seconds between starts")
    parser.add_argument("--in-flight", type=int, help="runs unfinished at once, at most (0: any)")
    parser.add_argument("--fault-every", type=float, help="mean seconds between faults")
    parser.add_argument("--fault-kinds", help=f"comma-separated, of: {', '.join(FAULTS)}")
    parser.add_argument("--lease", type=int, help="LOOP_LEASE_SECONDS")
    parser.add_argument("--delay", type=float, help="LOOP_DEMO_DELAY, seconds a word")
    parser.add_argument("--sweep-every", type=float, help="seconds (paced: beat's period)")
    parser.add_argument(
        "--recovery-p90", type=float, help="fail unless the kills' recovery p90 is under this (s)"
    )
    parser.add_argument("--settle", type=float, default=600, help="seconds after the chaos")
    parser.add_argument("--seed", type=int, default=29)
    args = parser.parse_args(argv)
    for name, value in PRESETS[args.preset].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if not args.minutes and (args.runs is None or args.faults is None):
        parser.error("without --minutes, give --runs and --faults")
    unknown = set(args.fault_kinds.split(",")) - set(FAULTS)
    if unknown:
        parser.error(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(FAULTS)}")
    args.fault_kinds = [FAULTS[name] for name in args.fault_kinds.split(",")]
    return args


def main() -> int:
    args = arguments()
    # Stopped early (timeout, kill PID): still stop the workers and Redis it started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    soak = Soak(args)
    try:
        return soak.run()
    finally:
        soak.close()


if __name__ == "__main__":
    sys.exit(main())
