"""`manage.py serve` (what `make run` starts): a busy port, a clean start and stop."""

import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

from tests.conftest import ROOT, wait_for


def _held_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    return sock, sock.getsockname()[1]


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
