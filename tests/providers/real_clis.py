"""The real agent CLIs (`make dev` installs them from the npm registry: Makefile AGENT_CLIS)
driven through the console against the scripted API (tests/providers/fakes/scripted_api.py).

Nothing is skipped: a missing CLI fails its tests, saying how to install it."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import wait_for

# The key the scripted API accepts. The worker holds it; the CLI gets a stand-in and the key
# proxy (runs/sandbox/keys.py) puts this one back on the way out.
SCRIPTED_KEY = "sk-scripted-api-key"
PACKAGES = {
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "opencode": "opencode-ai",
    "gemini": "@google/gemini-cli",
}
LOOP_PROMPT = "Do the next step. When finished, output: COMPLETE"


def cli(name: str) -> str:
    """The CLI's path: the project's environment first (where `make dev` puts it), then PATH."""
    local = Path(sys.executable).parent / name
    found = str(local) if os.access(local, os.X_OK) else shutil.which(name)
    if not found:
        pytest.fail(
            f"the {name} CLI is not installed: `make dev` installs {PACKAGES[name]} from the npm "
            f"registry (it needs npm; by hand: npm install -g --prefix .venv {PACKAGES[name]})",
            pytrace=False,
        )
    return found


def provider(name: str, kind: str, command: str, model: str, env: dict) -> object:
    """An administrator's provider row for the CLI (rows may point at any host)."""
    from runs.models import ProviderConfig

    return ProviderConfig.objects.create(
        name=name, kind=kind, command=command, model=model, options={"env": env}
    )


def loop_recipe(provider_name: str, *, fresh: bool = False) -> str:
    return f"""
name: real-cli-loop
provider: {provider_name}
nodes:
  - id: work
    loop:
      prompt: "{LOOP_PROMPT}"
      until: COMPLETE
      max_iterations: 3
      fresh_context: {"true" if fresh else "false"}
"""


def handoff_recipe(provider_name: str) -> str:
    return f"""
schema: planeai.loop.recipe.v1
id: real-cli-handoff
name: A real CLI records its handoff
roles:
  maker: {{provider: {provider_name}, mode: write, isolation: project}}
steps:
  - id: make
    kind: session.create
    role: maker
    prompt: "Make it, then record your handoff with the record_handoff tool."
  - {{id: wait, kind: handoff.wait, from: maker, on: {{completed: done}}}}
  - {{id: done, kind: loop.status, status: approved}}
"""


def steps(turn) -> int:
    """How many of the loop's prompts the conversation holds (2 once a session is resumed)."""
    return sum(LOOP_PROMPT[:16] in prompt for prompt in turn.prompts)


def two_steps(turn):
    """The first prompt of a session is answered without the signal, the second with it."""
    from tests.providers.fakes.scripted_api import Reply

    if steps(turn) < 2:
        return Reply(text="Step one is done; one more to go.")
    return Reply(text="Both steps are done. COMPLETE")


def hand_off(turn):
    """Call record_handoff, then say so once its result is back."""
    from tests.providers.fakes.scripted_api import Reply

    if turn.results or not turn.tools:  # done, or a call of the CLI's own (a title)
        return Reply(text="Handoff recorded.")
    return Reply(
        tool=turn.tool("record_handoff"),
        arguments={"status": "completed", "summary": f"made by the real {turn.vendor} CLI"},
    )


def cancel_and_wait_gone(run, api) -> None:
    """Cancel once the CLI's request is held open by the API; every process of the agent,
    found by its working folder, must die."""
    from runs.actor import Actor
    from runs.executor.context import run_dirs
    from runs.services import cancel_run
    from tests.agent_process import processes_in

    assert api.hanging.wait(120), "the CLI never reached the scripted API"
    workdir, _ = run_dirs(run)
    assert processes_in(workdir), "the CLI should be running"
    cancel_run(run, Actor("console"))
    wait_for(lambda: not processes_in(workdir), 30, message="the CLI's processes to die")
