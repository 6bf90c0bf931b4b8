"""Cancelling a run stops a streaming agent promptly: the CLI process dies, the HTTP
stream is closed."""

from __future__ import annotations

import os
import time

from runs.actor import Actor
from runs.executor.context import run_dirs
from runs.models import Iteration
from runs.services import cancel_run
from tests.agent_process import processes_in
from tests.conftest import wait_for, wait_run
from tests.providers.conftest import FAKE_CLAUDE, fake_calls, seen_streaming
from tests.providers.test_cli_agents import loop_recipe
from tests.providers.test_http_agents import recipe


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for its parent counts as gone
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except OSError:
        return False


def test_cancel_kills_a_cli_agent_mid_answer(live_worker, start):
    run = start(loop_recipe("claude", f"{FAKE_CLAUDE} --fake-delay 5", fresh=False))
    seen_streaming(run, "[Bash] ls -la")
    (call,) = fake_calls(run, ".fake-claude")
    # The agent runs in its sandbox's own PID namespace: found by its working folder.
    workdir, _ = run_dirs(run)
    assert processes_in(workdir), "the fake claude should be running"
    cancel_run(run, Actor("console"))
    wait_for(lambda: not processes_in(workdir), 5, message="the fake claude to die")
    wait_run(run, "cancelled")
    it = Iteration.objects.get(run=run)
    assert wait_for(lambda: Iteration.objects.get(pk=it.pk).status != "running", 5)
    it.refresh_from_db()
    # What the agent printed before the cancel, and how long it ran, are kept.
    assert it.status == "cancelled" and "[Bash] ls -la" in it.output
    assert it.duration_ms is not None and it.duration_ms > 0


def test_cancel_closes_an_http_stream_mid_answer(live_worker, start, fake_ai):
    fake_ai.delay = 1.0
    fake_ai.answers = ["one two three four five six seven eight nine ten"]
    run = start(recipe("openai", fake_ai.url + "/v1"))
    seen_streaming(run, "one")
    cancelled_at = time.monotonic()
    cancel_run(run, Actor("console"))
    wait_run(run, "cancelled")
    wait_for(
        lambda: Iteration.objects.get(run=run).status != "running", 5, message="iteration to stop"
    )
    assert time.monotonic() - cancelled_at < 5
    wait_for(lambda: fake_ai.aborted == 1, 5, message="the client to close the stream")
    assert len(fake_ai.requests) == 1  # not retried after the cancel
