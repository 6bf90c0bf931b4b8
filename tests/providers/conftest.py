"""Fixtures for the provider tests: fake CLIs, a fake HTTP API, recipes pointing at them.

The worker process copies os.environ when it starts (tests.conftest.worker_env), which is
after collection, so keys set here at import time reach it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import wait_for

FAKE_KEY = "sk-fake-provider-key"
os.environ.setdefault("FAKE_PROVIDER_KEY", FAKE_KEY)
os.environ.setdefault("FAKE_PROVIDER_WRONG_KEY", "sk-not-the-right-one")
# The key variables these tests name must be on the allow-list, in the worker (which reads
# the environment when it starts) and in this process (where recipes are validated).
TEST_KEY_ENV = ["FAKE_PROVIDER_KEY", "FAKE_PROVIDER_WRONG_KEY", "NO_SUCH_KEY_VARIABLE"]
os.environ.setdefault("LOOP_PROVIDER_ENV", ",".join(TEST_KEY_ENV))
# Worktrees only apply to runs started on the top folder of a git repository, so turning
# them on for the whole session changes nothing for runs elsewhere.
os.environ.setdefault("LOOP_GIT_WORKTREES", "1")

FAKES = Path(__file__).resolve().parent / "fakes"
FAKE_CLAUDE = FAKES / "fake_claude.py"
FAKE_CODEX = FAKES / "fake_codex.py"
FAKE_COMMAND = FAKES / "fake_command.py"


@pytest.fixture(autouse=True)
def test_key_env_allowed(settings):
    settings.LOOP_PROVIDER_ENV = [*settings.LOOP_PROVIDER_ENV, *TEST_KEY_ENV]


@pytest.fixture(scope="session")
def fake_ai_server():
    from tests.providers.fakes.http_server import FakeAI

    server = FakeAI(os.environ["FAKE_PROVIDER_KEY"]).start()
    yield server
    server.stop()


@pytest.fixture
def fake_ai(fake_ai_server):
    fake_ai_server.reset()
    yield fake_ai_server
    fake_ai_server.reset()


@pytest.fixture
def start(make_recipe):
    """Start a run of a recipe given as YAML text; returns the Run."""
    from runs.actor import ENGINE
    from runs.services import start_run

    def go(source: str, message: str = "please work", **kwargs):
        recipe = make_recipe(source, slug=kwargs.pop("slug", "provider-test"))
        return start_run(recipe, kwargs.pop("actor", ENGINE), message=message, **kwargs)

    return go


def fake_calls(run, folder: str) -> list[dict]:
    """What a fake CLI recorded about its calls in the run's working directory."""
    from runs.executor.context import run_dirs

    path = run_dirs(run)[0] / folder / "calls.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def iterations(run):
    from runs.models import Iteration

    return list(Iteration.objects.filter(run=run).order_by("number"))


def node(run, node_id: str = "work"):
    from runs.models import NodeRun

    return NodeRun.objects.get(run=run, node_id=node_id, iteration=0)


def seen_streaming(run, text: str, timeout: float = 20) -> str:
    """Wait until a running iteration's raw_output holds `text`; return what it held."""
    from runs.models import Iteration

    def partial():
        row = Iteration.objects.filter(run=run, status="running").first()
        return row.raw_output if row is not None and text in row.raw_output else ""

    return wait_for(partial, timeout, interval=0.05, message=f"streamed {text!r}")


@pytest.fixture(scope="session")
def scripted_api_server():
    from tests.providers.fakes.scripted_api import ScriptedAPI
    from tests.providers.real_clis import SCRIPTED_KEY

    server = ScriptedAPI(SCRIPTED_KEY).start()
    yield server
    server.stop()


@pytest.fixture
def scripted_api(scripted_api_server):
    scripted_api_server.reset()
    yield scripted_api_server
    scripted_api_server.reset()
