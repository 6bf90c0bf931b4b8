"""`manage.py serve` (what `make run` starts): a busy port, a clean start and stop."""

import os
import signal
import socket
import subprocess
import sys
import time
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import ROOT, wait_for


def _held_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    return sock, sock.getsockname()[1]


def _database_url_without_password(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme.startswith("postgres") and bool(parts.hostname) and not parts.password


def _serve(env, *args, **popen):
    return subprocess.Popen(
        [sys.executable, "manage.py", "serve", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **popen,
    )


def _descendants(pid: int) -> list[int]:
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return found


def _group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def _members(groups: set[int]) -> list[int]:
    """Live (not zombie) processes of the given process groups."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z" and int(fields[2]) in groups:
                found.append(int(entry))
    return found


def _with_env(entry: str) -> list[int]:
    """Processes whose environment holds `entry` (ours and their children's, orphans too)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                with open(f"/proc/{pid}/environ", "rb") as env:
                    if entry.encode() in env.read().split(b"\0"):
                        found.append(int(pid))
            except OSError:
                continue
    return found


def test_a_port_in_use_fails_fast_with_a_clear_message(worker_env):
    held, port = _held_port()
    queue = f"serve-busy-{os.getpid()}"
    try:
        proc = _serve({**worker_env, "PORT": str(port), "LOOP_QUEUE": queue})
        out, err = proc.communicate(timeout=120)
    finally:
        held.close()
    assert proc.returncode != 0
    assert f"Port {port} on 127.0.0.1 is already in use" in err
    assert f"make run PORT={port + 1}" in err
    assert "running at" not in out
    assert _with_env(f"LOOP_QUEUE={queue}") == []  # nothing was started, nothing is left


@pytest.mark.worker  # `manage.py serve` starts a worker of its own
@pytest.mark.django_db(transaction=True)
def test_serve_prints_the_url_once_it_answers_and_stops_everything(worker_env):
    held, port = _held_port()
    held.close()
    env = {**worker_env, "LOOP_QUEUE": f"serve-test-{os.getpid()}"}
    proc = _serve(env, "--port", str(port), "--concurrency", "1")
    lines = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "running at" in line:
                break
        assert any(f"running at http://127.0.0.1:{port}/" in line for line in lines), lines
        # Printed only once bound and answering.
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code in (200, 503)
        started = _descendants(proc.pid)
        assert started
        # Wait until the worker's pool is up, so its processes are among those checked.
        wait_for(lambda: len(_descendants(proc.pid)) >= 4, 60, message="the worker's pool")
        groups = {_group(pid) for pid in _descendants(proc.pid)} - {None}
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
    assert proc.returncode == 0, proc.stderr.read()
    # Not only the processes seen: every member of their process groups is gone (a pool
    # process or the beat whose leader exited first must not live on, orphaned).
    wait_for(lambda: not _members(groups), 30, message=f"processes left: {_members(groups)}")


GATED_THEN_SLOW = """
name: gated-then-slow
nodes:
  - id: check
    approval:
      message: Go on?
  - id: slow
    depends_on: [check]
    bash: sleep 120
"""


class _Output:
    """What a `serve` process prints (stdout and stderr), read as it comes."""

    def __init__(self, proc):
        import threading

        self.lines: list[str] = []
        self.readers = [
            threading.Thread(target=self._read, args=(stream,), daemon=True)
            for stream in (proc.stdout, proc.stderr)
        ]
        for reader in self.readers:
            reader.start()

    def _read(self, stream):
        for line in iter(stream.readline, ""):
            self.lines.append(line)

    def text(self, start: int = 0) -> str:
        return "".join(self.lines[start:])


@pytest.mark.worker  # `manage.py serve` starts a worker of its own
@pytest.mark.django_db(transaction=True)
def test_make_run_links_to_its_own_port_and_stops_quietly_mid_step(
    worker_env, make_recipe, operator, tmp_path
):
    """`make run PORT=…` (embedded broker, no LOOP_BASE_URL): a notification's link names
    that port, the mail is printed as it is (not as warnings), and Ctrl-C while a step runs
    stops the worker before its broker: no traceback, no lost-broker errors."""
    from console.models import ApiToken
    from notifications.models import Subscription
    from runs.models import NodeRun, Run

    recipe = make_recipe(GATED_THEN_SLOW, slug="gated-then-slow")
    Subscription.objects.create(
        name="mail me", channel="email", recipe=recipe, email="otto@example.com"
    )
    _, secret = ApiToken.issue(operator, name="serve test", scope="operate")
    held, port = _held_port()
    held.close()
    data = tmp_path / "data"
    data.mkdir()
    # Its own embedded broker (as `make run` has), on the test database.
    env = {
        k: v
        for k, v in worker_env.items()
        if k not in ("REDIS_URL", "CELERY_BROKER_URL", "LOOP_BASE_URL")
    }
    env.update(LOOP_DATA_DIR=str(data), LOOP_QUEUE=f"serve-port-{os.getpid()}")
    proc = _serve(env, "--port", str(port), "--concurrency", "2")
    out = _Output(proc)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: "running at" in out.text(), 120, message="serve to start")
        api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {secret}"})
        started = api.post("/api/runs", json={"recipe": "gated-then-slow", "message": "go"})
        assert started.status_code == 201, started.text
        run = Run.objects.get(pk=started.json()["id"])
        gate = wait_for(lambda: run.gates.filter(status="pending").first(), 60, message="gate")
        link = f"{base}/runs/{run.pk}/gates/{gate.pk}/"
        wait_for(lambda: link in out.text(), 90, message=f"the mail linking {link}")
        # Its embedded broker is out of the agents' reach; the suite's PostgreSQL (over TCP,
        # password-less on CI) is not, and its worker says so (runs/sandbox/exposure.py).
        exposed = [line for line in out.lines if "without a password. Agents with" in line]
        if _database_url_without_password(env.get("DATABASE_URL", "")):
            assert len(exposed) == 1 and "DATABASE_URL names PostgreSQL at" in exposed[0]
        else:
            assert not exposed, exposed
        quiet = "".join(line for line in out.lines if line not in exposed)
        assert "WARNING" not in quiet and "celery.redirected" not in quiet

        decided = api.post(f"/api/runs/{run.pk}/approve", json={})
        assert decided.status_code == 200, decided.text
        wait_for(
            lambda: NodeRun.objects.filter(run=run, node_id="slow", status="running").exists(),
            90,
            message="the slow step to run",
        )
        mark = len(out.lines)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=120)
        for reader in out.readers:
            reader.join(timeout=10)
    said = out.text(mark)
    assert proc.returncode == 0, said
    assert said.rstrip().endswith("stopped"), said
    for noise in ("Traceback", "CRITICAL", "WorkerLostError", "Couldn't", "broker unreachable"):
        assert noise not in said, said
