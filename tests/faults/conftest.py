"""Machinery for the fault suite: a private Redis, private workers, a slow fake agent.

Every fault test runs its workers on a Redis server and a queue of its own, so killing a
worker, stopping Redis or shrinking the visibility timeout never touches the shared
services other suites use. Their agents run without the sandbox (LOOP_SANDBOX=off): the
suite watches each agent by its process group on this machine and writes markers to a
file of its own, which a sandboxed agent could do neither of. That a sandboxed agent dies
with a killed worker is tests/sandbox/test_process_tree.py. The test process sends its own tasks (start, approve, sweep)
to that queue through `FaultEngine.send`, patched over `runs.dispatch.deliver`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
import redis
from celery import Celery

from tests.conftest import Worker, wait_for

# A fake command-line agent. It reads the prompt, then writes timestamped markers (start,
# ticks, output, said, end) to a file while it works, from a background subshell: like a
# real agent CLI it has children of its own, which must die with the worker too.
AGENT_SCRIPT = r"""#!/usr/bin/env bash
markers=$1 slow_iteration=$2 pre=$3 mid=$4 post=$5 complete_after=$6
cat >/dev/null
read -r _ _ _ _ pgid _ < /proc/$$/stat
if [ "$LOOP_ITERATION" != "$slow_iteration" ]; then pre=1 mid=1 post=1; fi
mark() { echo "$1 $WORKFLOW_ID $LOOP_ITERATION $BASHPID $pgid $(date +%s.%N)" >> "$markers"; }
pause() { local i; for ((i = 0; i < $1; i++)); do mark tick; sleep 0.05; done; }
work() {
  mark start
  pause "$pre"
  echo "iteration $LOOP_ITERATION working"
  mark output
  for ((i = 0; i < mid; i++)); do echo "step $i"; mark tick; sleep 0.05; done
  if [ "$LOOP_ITERATION" -ge "$complete_after" ]; then echo "<promise>COMPLETE</promise>"; fi
  mark said
  pause "$post"
  mark end
}
work &
wait $!
"""


def agent_recipe(
    script: Path,
    markers: Path,
    *,
    slow_iteration: int = 0,
    pre: int = 1,
    mid: int = 1,
    post: int = 1,
    complete_after: int = 3,
    max_iterations: int = 6,
    interactive: bool = False,
) -> str:
    command = f"bash {script} {markers} {slow_iteration} {pre} {mid} {post} {complete_after}"
    extra = "\n      interactive: true\n      gate_message: Read it." if interactive else ""
    return f"""
name: fault-loop
interactive: {"true" if interactive else "false"}
providers:
  slow:
    kind: command
    command: "{command}"
nodes:
  - id: work
    provider: slow
    loop:
      prompt: "Work on it. When everything is done, output: COMPLETE"
      until: COMPLETE
      max_iterations: {max_iterations}{extra}
"""


def read_markers(path: Path) -> list[dict]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) != 6:
            continue  # a line cut short by a kill
        kind, run, iteration, pid, pgid, at = parts
        rows.append(
            {
                "kind": kind,
                "run": int(run),
                "iteration": int(iteration),
                "pid": int(pid),
                "pgid": int(pgid),
                "at": float(at),
            }
        )
    return rows


def agent_intervals(markers: list[dict]) -> list[tuple[float, float, int]]:
    """(first, last, pgid) of every agent process group, in start order."""
    spans: dict[int, list[float]] = {}
    for mark in markers:
        spans.setdefault(mark["pgid"], []).append(mark["at"])
    return sorted((min(times), max(times), pgid) for pgid, times in spans.items())


def assert_never_concurrent(markers: list[dict]) -> None:
    by_run: dict[int, list[dict]] = {}
    for mark in markers:
        by_run.setdefault(mark["run"], []).append(mark)
    for run_marks in by_run.values():
        spans = agent_intervals(run_marks)
        for (_, end, first), (start, _, second) in zip(spans, spans[1:], strict=False):
            assert start > end, f"agents {first} and {second} of one run overlapped"


def processes_in_group(pgid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(entry.name))
    return found


def assert_no_orphans(pgids, timeout: float = 0.5) -> None:
    """The agents' process groups are empty (a killed worker took its agents with it)."""
    deadline = time.monotonic() + timeout
    left = {pgid: processes_in_group(pgid) for pgid in pgids}
    while any(left.values()) and time.monotonic() < deadline:
        time.sleep(0.1)
        left = {pgid: processes_in_group(pgid) for pgid in pgids}
    assert not any(left.values()), f"orphaned agent processes survived the worker: {left}"


def assert_recorded_once(run) -> None:
    """Each iteration number has one row and, if it finished, exactly one completion event."""
    from runs.models import Iteration

    rows = Counter(Iteration.objects.filter(run=run).values_list("node_id", "generation", "number"))
    assert all(count == 1 for count in rows.values()), rows
    completed = Counter(
        (e.step, e.data.get("iteration")) for e in run.events.filter(kind="iteration_completed")
    )
    assert all(count == 1 for count in completed.values()), completed
    finished = {
        (node_id, number)
        for node_id, number in Iteration.objects.filter(
            run=run, status=Iteration.Status.COMPLETED
        ).values_list("node_id", "number")
    }
    assert finished == set(completed), (finished, completed)
    seqs = list(run.events.values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1)), "the event log has gaps or repeats"


# --- a private Redis -----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    def __init__(self, folder: Path):
        self.folder = folder
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.log = open(self.folder / f"redis-{self.port}.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--dir",
                str(self.folder),
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        client = redis.Redis(port=self.port, socket_timeout=1)
        wait_for(lambda: self._ping(client), 10, message="redis-server to answer")
        return self

    @staticmethod
    def _ping(client) -> bool:
        try:
            return client.ping()
        except redis.RedisError:
            return False

    def stop(self, sig=signal.SIGTERM) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=10)
        self.log.close()


@pytest.fixture(scope="session")
def fault_redis(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("fault-redis")).start()
    yield server
    server.stop()


# --- private workers and the engine's way in -------------------------------------------------


class FaultWorker(Worker):
    """A worker on the fault suite's own queue and Redis (both named in its env)."""

    name_prefix = "fault"

    def start(self, concurrency: int = 2):
        return super().start(concurrency)

    def kill(self) -> None:
        """SIGKILL the whole worker (main process and pool), as a lost machine would."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.log.close()

    def pool_pids(self) -> list[int]:
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        return [int(pid) for pid in children.read_text().split()]


class FaultEngine:
    def __init__(self, redis_url: str, worker_env: dict, folder: Path, monkeypatch):
        self.redis_url = redis_url
        self.queue = f"faults-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.folder = folder
        self.env = {
            **worker_env,
            "LOOP_QUEUE": self.queue,
            "REDIS_URL": redis_url,
            "LOOP_LEASE_SECONDS": "2",
            "LOOP_SANDBOX": "off",
        }
        self.env.pop("CELERY_BROKER_URL", None)
        self.workers: list[FaultWorker] = []
        self.client = Celery("fault-client", broker=redis_url, set_as_current=False)
        self.client.conf.update(
            broker_connection_retry_on_startup=True,
            task_serializer="json",
            broker_transport_options={"max_retries": 20, "interval_start": 0.2},
        )
        from runs import dispatch

        monkeypatch.setattr(dispatch, "deliver", self.send)

    def send(self, task_name: str, *args) -> None:
        from runs import dispatch

        # The name it is registered under: runs.tasks.*, or a kind's or an app's own.
        name = dispatch.task(task_name).name
        self.client.send_task(name, args=list(args), queue=self.queue)

    def start_worker(self, concurrency: int = 2, **env) -> FaultWorker:
        log = self.folder / f"worker-{len(self.workers)}.log"
        worker = FaultWorker(log, {**self.env, **{k: str(v) for k, v in env.items()}})
        self.workers.append(worker.start(concurrency))
        return worker

    def sweep_until(self, runs, *states, timeout: float = 60, every: float = 0.3) -> None:
        """Run the sweep (as beat would, but often) until every run is in one of `states`."""
        from runs.executor.sweep import sweep

        states = states or ("completed", "failed", "cancelled")
        deadline = time.monotonic() + timeout
        while True:
            for run in runs:
                run.refresh_from_db()
            if all(run.status in states for run in runs):
                return
            if time.monotonic() > deadline:
                raise AssertionError(
                    "runs did not settle: " + ", ".join(f"{r.pk} {r.status}" for r in runs)
                )
            sweep()
            time.sleep(every)

    def close(self) -> None:
        for worker in self.workers:
            worker.stop(signal.SIGKILL)
        self.client.close()


@pytest.fixture
def fault_engine(transactional_db, worker_env, fault_redis, monkeypatch, tmp_path, settings):
    settings.LOOP_STALE_PENDING_SECONDS = 1
    engine = FaultEngine(fault_redis.url, worker_env, tmp_path, monkeypatch)
    yield engine
    engine.close()


@pytest.fixture
def agent_script(tmp_path) -> Path:
    path = tmp_path / "agent.sh"
    path.write_text(AGENT_SCRIPT)
    return path
