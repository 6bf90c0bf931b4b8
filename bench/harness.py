"""What every benchmark shares: a scratch database, a private queue, real workers, and a
table plus a JSON file of the figures.

Call `Bench.open(name)` before importing any model: it configures Django from the
environment (DATABASE_URL must be PostgreSQL, REDIS_URL a Redis), creates a scratch
database with Django's test-database machinery (named by BENCH_DB, else `name_<pid>`, so
concurrent runs never share one), and tears everything down on close.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def machine() -> dict:
    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_kb = next(
        int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal")
    )
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory_gb": round(mem_kb / 1024 / 1024, 1),
        "python": platform.python_version(),
        "kernel": platform.release(),
    }


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


class Bench:
    def __init__(self, name: str, old_db_name: str, db_url: str, data_dir: str):
        self.name = name
        self.old_db_name = old_db_name
        self.db_url = db_url
        self.data_dir = data_dir
        self.queue = os.environ["LOOP_QUEUE"]
        self.workers: list[tuple[subprocess.Popen, Path]] = []

    @classmethod
    def open(cls, name: str, **env: str) -> Bench:
        database_url = os.environ.get("DATABASE_URL", "")
        if not database_url.startswith(("postgres://", "postgresql://")):
            sys.exit("Set DATABASE_URL to a PostgreSQL server (the scratch database is created).")
        if not os.environ.get("REDIS_URL", "").startswith("redis"):
            sys.exit("Set REDIS_URL to a Redis server (a private queue is used on it).")
        # The scratch database: BENCH_DB names it; else it is private to this process,
        # so two people running one benchmark at once never clobber each other's.
        name = os.environ.get("BENCH_DB") or f"{name}_{os.getpid()}"
        data_dir = tempfile.mkdtemp(prefix=f"loop-{name}-")
        os.environ.update(
            {
                "DJANGO_SETTINGS_MODULE": "console.settings",
                "LOOP_QUEUE": f"bench-{name}-{os.getpid()}",
                "LOOP_DATA_DIR": data_dir,
                "LOOP_DEMO_DELAY": "0",
                "LOG_LEVEL": "WARNING",
                **env,
            }
        )
        sys.path.insert(0, str(ROOT))
        import django

        django.setup()
        from django.db import connection, connections

        connections["default"].settings_dict["TEST"]["NAME"] = name
        old = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
        parts = urlsplit(database_url)
        db_url = urlunsplit(parts._replace(path="/" + name))
        return cls(name, old, db_url, data_dir)

    # --- workers -----------------------------------------------------------------------

    def start_worker(self, concurrency: int = 2, **env: str) -> None:
        number = len(self.workers)
        log = Path(self.data_dir) / f"worker-{number}.log"
        ready = Path(self.data_dir) / f"worker-{number}.ready"
        argv = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "console",
            "worker",
            "--loglevel",
            "WARNING",
            "--concurrency",
            str(concurrency),
            "-Q",
            self.queue,
            "-I",
            "bench.floor_tasks",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-n",
            f"{self.name}-{number}-{os.getpid()}@%h",
        ]
        handle = open(log, "ab")  # noqa: SIM115 - the worker owns it until it exits
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env={
                **os.environ,
                "DATABASE_URL": self.db_url,
                "BENCH_READY_FILE": str(ready),
                **env,
            },
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.workers.append((proc, log))
        deadline = time.monotonic() + 60
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                sys.exit("worker did not start:\n" + log.read_text()[-3000:])
            time.sleep(0.1)
        time.sleep(0.5)  # let the pool processes finish importing

    def stop_workers(self) -> None:
        for proc, _ in self.workers:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc, _ in self.workers:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.workers.clear()

    # --- results -----------------------------------------------------------------------

    def report(
        self, result: str, title: str, columns: list[str], rows: list[list], figures: dict
    ) -> Path:
        widths = [
            max([len(str(col)), *(len(_cell(row[i])) for row in rows)])
            for i, col in enumerate(columns)
        ]
        print(f"\n{title}")
        print("  ".join(str(col).ljust(w) for col, w in zip(columns, widths, strict=True)))
        print("  ".join("-" * w for w in widths))
        for row in rows:
            print("  ".join(_cell(v).ljust(w) for v, w in zip(row, widths, strict=True)))
        RESULTS.mkdir(parents=True, exist_ok=True)
        path = RESULTS / f"{result}.json"
        payload = {
            "benchmark": self.name,
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": machine(),
            "figures": figures,
        }
        path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
        print(f"\nwrote {path.relative_to(ROOT)}")
        return path

    def close(self) -> None:
        self.stop_workers()
        from django.db import connection

        connection.creation.destroy_test_db(self.old_db_name, verbosity=0)
        import redis

        client = redis.Redis.from_url(os.environ["REDIS_URL"])
        client.delete(
            self.queue,
            f"_kombu.binding.{self.queue}",
            f"_kombu.binding_permanent.{self.queue}",
            *client.scan_iter(f"bench:{self.name}:*"),
        )
        for key in client.scan_iter(f"loopconsole:{self.queue}:*"):  # live output buffers
            client.delete(key)
        shutil.rmtree(self.data_dir, ignore_errors=True)


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def make_recipe(source: str, slug: str):
    from recipes.editing import SourceInvalid, create_recipe

    try:
        recipe, _ = create_recipe(source, slug=slug)
    except SourceInvalid as exc:
        sys.exit(f"benchmark recipe {slug} is invalid: {[str(p) for p in exc.result.errors]}")
    return recipe


def wait_runs(runs, timeout: float = 600, interval: float = 0.01) -> None:
    from runs.models import Run

    ids = [run.pk for run in runs]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = Run.objects.filter(pk__in=ids).exclude(status__in=Run.TERMINAL).count()
        if not left:
            return
        time.sleep(interval)
    sys.exit(f"runs did not finish within {timeout}s")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrivateRedis:
    """A redis-server of a benchmark's own, on a free port: one it may kill and restart."""

    def __init__(self, folder: Path):
        self.folder, self.port, self.proc = folder, free_port(), None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        log = open(self.folder / "redis.log", "ab")  # noqa: SIM115 - the server owns it
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
            + ["--appendonly", "no", "--dir", str(self.folder)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        import redis

        client = redis.Redis(port=self.port, socket_timeout=1)
        for _ in range(100):
            try:
                if client.ping():
                    return
            except redis.RedisError:
                time.sleep(0.1)
        sys.exit("redis-server did not start")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
