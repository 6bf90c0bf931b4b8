"""The resource limits a sandbox holds to: its /tmp within its memory, its processes counted
per sandbox (not per user), no file larger than the administrator allows."""

from __future__ import annotations

import os
import subprocess
import threading

import pytest

from runs.sandbox import Limits, cgroups, for_run, run_process
from tests.sandbox.conftest import requires_sandbox

# Why a cgroup test cannot run on a machine; `what` names what goes untested.
NO_CGROUP = (
    "the worker may make no cgroup on this machine (run it as root, or give it a delegated "
    "cgroup): {what} is not tested here"
)


def bash(script: str, workdir, limits: Limits, on_chunk=lambda text: None):
    return run_process(
        ["bash", "-c", script], sandbox=for_run(None, workdir, limits=limits), on_chunk=on_chunk
    )


@requires_sandbox
def test_tmp_holds_no_more_than_the_memory_limit(tmp_path):
    done = bash(
        "head -c 200M /dev/zero > /tmp/big; echo status=$?; stat -c size=%s /tmp/big; "
        "df -m --output=size /tmp | tail -1",
        tmp_path,
        Limits(memory_mb=64),
    )
    lines = done.output.split()
    assert "status=0" not in lines, done.output
    size = int(next(word for word in lines if word.startswith("size=")).split("=")[1])
    assert size <= 64 * 1024 * 1024, done.output
    assert int(lines[-1]) <= 64, done.output  # the tmpfs's own size, in MB


@requires_sandbox
def test_tmp_without_a_memory_limit_holds_the_administrators_tmp_size(settings, tmp_path):
    settings.LOOP_SANDBOX_MEMORY_MB = 0
    settings.LOOP_SANDBOX_TMP_MB = 32
    done = bash("df -m --output=size /tmp /var/tmp /run | tail -3", tmp_path, Limits())
    assert [int(size) for size in done.output.split()] == [32, 32, 32], done.output


@requires_sandbox
def test_a_file_larger_than_the_cap_is_not_written(tmp_path):
    done = bash("head -c 3M /dev/zero > big; echo status=$?", tmp_path, Limits(file_mb=1))
    assert "status=0" not in done.output, done.output
    assert (tmp_path / "big").stat().st_size <= 1024 * 1024


def test_the_administrators_file_cap_is_the_default_and_a_recipe_asks_for_less(settings):
    settings.LOOP_SANDBOX_FILE_MB = 1024
    assert Limits().effective()["file_mb"] == 1024
    assert Limits(file_mb=10).effective()["file_mb"] == 10
    settings.LOOP_SANDBOX_FILE_MB = 0  # no cap of the administrator's: the recipe's holds
    assert Limits(file_mb=10).effective()["file_mb"] == 10


# Forks children that wait until it is done, until a fork fails; says how many it made.
FORK_LOOP = """
import os, sys, time
made = 0
try:
    while made < 200:
        if os.fork() == 0:
            time.sleep(4)
            os._exit(0)
        made += 1
except OSError as exc:
    print("fork refused:", exc.strerror, flush=True)
print(f"FULL {made}", flush=True)
time.sleep(3)
"""


def cgroup_counts_processes() -> bool:
    return "pids" in cgroups._parents()


@requires_sandbox
def test_processes_count_per_sandbox_so_a_fork_bomb_starves_only_its_own(tmp_path):
    if not cgroup_counts_processes():
        pytest.skip(NO_CGROUP.format(what="`processes` per sandbox (it counts per user here)"))
    (tmp_path / "bomb").mkdir()
    (tmp_path / "other").mkdir()
    full = threading.Event()
    seen: list[str] = []

    def watch(text: str) -> None:
        seen.append(text)
        if "FULL" in "".join(seen):
            full.set()

    bomb: dict = {}
    thread = threading.Thread(
        target=lambda: bomb.update(
            result=run_process(
                ["python3", "-c", FORK_LOOP],
                sandbox=for_run(None, tmp_path / "bomb", limits=Limits(processes=20)),
                on_chunk=watch,
            )
        )
    )
    thread.start()
    try:
        assert full.wait(60), "".join(seen)
        # While the bomb holds every process it may have, another sandbox starts its own.
        other = bash(
            "for i in $(seq 10); do sleep 0.2 & done; wait; echo OTHER-STARTED-TEN",
            tmp_path / "other",
            Limits(processes=20),
        )
        assert "OTHER-STARTED-TEN" in other.output, other.output
    finally:
        thread.join(60)
    output = bomb["result"].output
    assert "fork refused: Resource temporarily unavailable" in output, output
    made = int(output.split("FULL")[1].split()[0])
    assert 10 <= made < 20, output  # its own processes, the worker's threads not counted


@requires_sandbox
def test_a_sandboxs_cgroup_is_gone_once_it_ends(tmp_path):
    if not cgroups._parents():
        pytest.skip(NO_CGROUP.format(what="removing a sandbox's cgroup when it ends"))
    before = _sandbox_cgroups()
    done = bash("sleep 0.1 & echo started", tmp_path, Limits(processes=20, memory_mb=256))
    assert done.output == "started\n"
    assert _sandbox_cgroups() == before


def _sandbox_cgroups() -> set[str]:
    """This process's sandbox cgroups (other processes may be making theirs meanwhile)."""
    mine = f"{cgroups.PREFIX}{os.getpid()}-"
    found = set()
    for parent in cgroups._parents().values():
        found |= {str(p) for p in parent.folder.iterdir() if p.name.startswith(mine)}
    return found


@requires_sandbox
def test_the_sandbox_as_a_whole_holds_its_memory_limit(tmp_path):
    """Each process may use `memory_mb`; all of them together at most that plus its /tmp."""
    if "memory" not in cgroups._parents():
        pytest.skip(NO_CGROUP.format(what="memory_mb per sandbox (it bounds each process here)"))
    hold = (
        "import time; b = bytearray(50 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]); "
        "time.sleep(2); print('SURVIVED')"
    )
    done = bash(
        f'for i in 1 2 3 4; do python3 -c "{hold}" & done; wait', tmp_path, Limits(memory_mb=64)
    )
    # 4 x 50 MB in a sandbox of 64 + 64 MB: the kernel kills what does not fit.
    survivors = done.output.splitlines().count("SURVIVED")
    assert 1 <= survivors < 4 and "Killed" in done.output, done.output


def test_a_cgroup_left_by_a_killed_worker_is_removed_by_the_next(tmp_path):
    """A worker killed mid-step cannot remove its sandbox's cgroup: the next one made here
    removes every cgroup whose worker process is gone."""
    if "pids" not in cgroups._parents():
        pytest.skip(NO_CGROUP.format(what="sweeping the cgroups of killed workers"))
    gone = subprocess.Popen(["true"])
    gone.wait()
    parent = cgroups._parents()["pids"].folder
    left = parent / f"{cgroups.PREFIX}{gone.pid}-deadbeef"
    left.mkdir()
    group = cgroups.create(processes=5, memory_mb=0)
    try:
        assert not left.exists()
    finally:
        group.remove()
        if left.exists():
            left.rmdir()
