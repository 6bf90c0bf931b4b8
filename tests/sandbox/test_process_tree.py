"""A sandboxed agent, and everything it started, dies with the worker that started it:
a retried iteration never races the agent of a killed one (the fault suite, which watches
agents by their process groups, runs them unsandboxed; this is the sandboxed case)."""

from __future__ import annotations

import signal

import pytest

from runs import services
from runs.actor import ENGINE
from runs.executor.context import run_dirs
from runs.models import Iteration
from tests.agent_process import processes_in
from tests.conftest import wait_for
from tests.sandbox.conftest import requires_sandbox, sending_to, start_private_worker

pytestmark = requires_sandbox

SLOW_AGENT = """
name: slow
providers:
  slow: {kind: command, command: "(sleep 300 &) ; (sleep 300 & wait) ; sleep 300"}
nodes:
  - id: work
    provider: slow
    loop: {prompt: "work", until: COMPLETE, max_iterations: 1}
"""


@pytest.fixture
def doomed_worker(worker_env, tmp_path_factory):
    worker = start_private_worker(worker_env, tmp_path_factory.mktemp("doomed"), "doomed")
    yield worker
    worker.stop()


@pytest.mark.parametrize("who", ["worker", "pool child"])
def test_killing_the_worker_kills_the_sandboxed_agent_and_its_children(
    doomed_worker, transactional_db, monkeypatch, make_recipe, who
):
    with sending_to(doomed_worker, monkeypatch):
        run = services.start_run(make_recipe(SLOW_AGENT, slug="slow"), actor=ENGINE)
        wait_for(
            lambda: Iteration.objects.filter(run=run, status="running").exists(),
            message="the agent to start",
        )
        workdir, _ = run_dirs(run)
        started = wait_for(
            lambda: len(processes_in(workdir)) >= 4 and processes_in(workdir),
            message="the agent and its children",
        )
        if who == "worker":
            doomed_worker.stop(signal.SIGKILL)
        else:
            (child,) = [pid for pid in _pool(doomed_worker) if _runs_agent(pid, started)]
            __import__("os").kill(child, signal.SIGKILL)
        wait_for(lambda: not processes_in(workdir), message="every agent process to die")


def _pool(worker) -> list[int]:
    with open(f"/proc/{worker.proc.pid}/task/{worker.proc.pid}/children") as children:
        return [int(pid) for pid in children.read().split()]


def _runs_agent(pool_pid: int, agents: list[int]) -> bool:
    """Whether one of `agents` descends from `pool_pid`."""
    for pid in agents:
        while pid > 1:
            if pid == pool_pid:
                return True
            try:
                with open(f"/proc/{pid}/stat") as stat:
                    pid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError):
                break
    return False
