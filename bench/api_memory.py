"""The web process's memory while five API clients read a run whose iteration printed 30 MB.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/api_memory.py [--rounds 10] [--clients 5]

A real worker runs the security probe's recipe (a command agent printing 300 lines of
100,000 characters in one loop iteration); then uvicorn, started as `manage.py serve` starts
it, serves `/api/runs/N`, `/iterations` and `/steps` to five concurrent clients, `--rounds`
times each, and afterwards the whole output's download to five clients at once. The
server's resident memory is sampled throughout (VmRSS), and its peak is the kernel's own
high-water mark (VmHWM). Before the output cap the same reads took the process to about
636 MB (docs/security.md, "Bounded output").
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.harness import ROOT, Bench, make_recipe, wait_runs

PROBE_RECIPE = """
name: dos2
providers:
  big:
    kind: command
    command: "for i in $(seq 1 300); do head -c 100000 /dev/zero | tr '\\\\0' 'A'; echo; done"
nodes:
  - id: big
    provider: big
    loop: {prompt: go, until: COMPLETE, max_iterations: 1}
"""


def memory(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of `pid` in bytes."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            name, value = line.split(":", 1)
            found[name] = int(value.split()[0]) * 1024
    return found["VmRSS"], found["VmHWM"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_web(bench: Bench, port: int) -> subprocess.Popen:
    from console.management.commands.serve import proxy_options

    log = open(Path(bench.data_dir) / "uvicorn.log", "ab")  # noqa: SIM115 - the server's
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "console.asgi:application"]
        + ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
        + proxy_options(),
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": bench.db_url},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    import httpx

    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit("uvicorn did not start")
        time.sleep(0.1)


class Sampler(threading.Thread):
    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.samples, self.running = pid, [], True

    def run(self):
        while self.running:
            self.samples.append(memory(self.pid)[0])
            time.sleep(0.02)


def read_concurrently(url: str, token: str, paths: list[str], clients: int, rounds: int):
    """Each client reads every path `rounds` times; the largest answer and the time taken."""
    import httpx

    largest, failures = [0], []

    def client():
        with httpx.Client(base_url=url, timeout=600) as http:
            for _ in range(rounds):
                for path in paths:
                    got = http.get(path, headers={"Authorization": f"Bearer {token}"})
                    if got.status_code != 200:
                        failures.append((path, got.status_code))
                    largest[0] = max(largest[0], len(got.content))

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        sys.exit(f"reads failed: {failures[:5]}")
    return largest[0], time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--clients", type=int, default=5)
    args = parser.parse_args()
    bench = Bench.open("api_memory")
    web = None
    try:
        from django.contrib.auth import get_user_model

        from console.models import ApiToken
        from console.roles import ensure_roles
        from runs import services
        from runs.actor import ENGINE

        bench.start_worker(concurrency=1)
        run = services.start_run(make_recipe(PROBE_RECIPE, "dos2"), actor=ENGINE, message="go")
        wait_runs([run], timeout=900)
        it = run.iterations.get()
        ensure_roles()
        from django.contrib.auth.models import Group

        viewer = get_user_model().objects.create_user("bench-viewer", password="x")
        viewer.groups.set(Group.objects.filter(name="viewer"))
        _, token = ApiToken.issue(viewer, name="bench")

        port = free_port()
        web = start_web(bench, port)
        url = f"http://127.0.0.1:{port}"
        paths = [
            f"/api/runs/{run.pk}",
            f"/api/runs/{run.pk}/iterations",
            f"/api/runs/{run.pk}/steps",
        ]
        read_concurrently(url, token, paths, 1, 1)  # warm: imports, the connection pool
        idle, _ = memory(web.pid)
        sampler = Sampler(web.pid)
        sampler.start()
        largest, seconds = read_concurrently(url, token, paths, args.clients, args.rounds)
        after_reads, peak_reads = memory(web.pid)
        download = [f"/api/runs/{run.pk}/iterations/{it.pk}/output"]
        largest_download, download_seconds = read_concurrently(
            url, token, download, args.clients, 1
        )
        sampler.running = False
        sampler.join()
        after, peak = memory(web.pid)
        mb = 1024 * 1024
        rows = [
            ["output printed (bytes)", it.output_bytes],
            ["output kept (bytes)", len(it.raw_output.encode())],
            ["largest API answer (bytes)", largest],
            ["web RSS before the reads (MB)", round(idle / mb, 1)],
            [
                f"web RSS peak, {args.clients} clients x {args.rounds} rounds x 3 endpoints (MB)",
                round(peak_reads / mb, 1),
            ],
            ["web RSS after the reads (MB)", round(after_reads / mb, 1)],
            ["reads took (s)", round(seconds, 1)],
            [f"download size, {args.clients} clients at once (bytes)", largest_download],
            ["web RSS peak, with the downloads (MB)", round(peak / mb, 1)],
            ["web RSS at the end (MB)", round(after / mb, 1)],
            ["downloads took (s)", round(download_seconds, 1)],
        ]
        bench.report(
            "api_memory",
            "The web process while five API clients read a run with a 30 MB iteration",
            ["figure", "value"],
            rows,
            {
                "output_bytes": it.output_bytes,
                "kept_bytes": len(it.raw_output.encode()),
                "largest_answer_bytes": largest,
                "rss_idle_mb": idle / mb,
                "rss_peak_reads_mb": peak_reads / mb,
                "rss_after_reads_mb": after_reads / mb,
                "rss_peak_with_downloads_mb": peak / mb,
                "rss_samples": len(sampler.samples),
                "clients": args.clients,
                "rounds": args.rounds,
            },
        )
    finally:
        if web is not None and web.poll() is None:
            os.killpg(web.pid, signal.SIGTERM)
            web.wait(timeout=30)
        bench.close()


if __name__ == "__main__":
    main()
