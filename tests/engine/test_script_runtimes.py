"""Which program runs a `script:` node: uv when installed, else this console's interpreter
for a script without dependencies; bun when installed. A missing runtime is a clear error
when the node starts, never when the recipe loads (the web process may not be a worker)."""

from __future__ import annotations

import sys

import pytest

from loops.workflow.script import command_line, find_runtime
from recipes.loader import load_recipe
from runs import services
from runs.actor import ENGINE
from runs.executor.agent import StepFailed
from tests.conftest import wait_run


def script_node(body: str):
    result = load_recipe("name: t\nnodes:\n  - id: s\n" + body)
    assert result.ok, result.errors
    return result.spec.node("s")


@pytest.fixture
def no_runtimes(settings, tmp_path):
    settings.LOOP_RUNTIME_DIRS = [str(tmp_path / "empty")]


def test_bun_missing_loads_but_fails_at_start_with_what_to_install(no_runtimes):
    node = script_node("    runtime: bun\n    script: console.log(1)\n")
    with pytest.raises(
        StepFailed,
        match=r"needs bun, which is not installed on this worker "
        r"\(install it with `npm install -g bun`\)",
    ):
        command_line(node, "script node 's'")


def test_without_uv_a_script_without_dependencies_runs_on_the_console_interpreter(no_runtimes):
    node = script_node("    runtime: uv\n    script: print(1)\n")
    assert command_line(node, "x") == [sys.executable, "-c", "print(1)"]


@pytest.mark.parametrize(
    "body",
    [
        "    runtime: uv\n    deps: [httpx]\n    script: import httpx\n",
        "    runtime: uv\n    script: |\n      # /// script\n      # dependencies = ['httpx']\n"
        "      # ///\n      import httpx\n",
    ],
    ids=["deps", "inline metadata"],
)
def test_without_uv_declared_dependencies_are_a_clear_error(no_runtimes, body):
    with pytest.raises(StepFailed, match="declares dependencies .* but uv is not installed"):
        command_line(script_node(body), "script node 's'")


def test_with_uv_scripts_run_through_uv_run_with_their_dependencies():
    uv = find_runtime("uv")
    assert uv, "uv is a dev dependency (pip install uv)"
    node = script_node("    runtime: uv\n    deps: [httpx>=0.27, rich]\n    script: print(1)\n")
    assert command_line(node, "x") == [
        uv,
        "run",
        "--quiet",
        "--no-project",
        "--with",
        "httpx>=0.27",
        "--with",
        "rich",
        "python",
        "-c",
        "print(1)",
    ]


SLOW = """
name: slow script
nodes:
  - id: slow
    runtime: uv
    timeout: 1000
    script: |
      import time
      print("started", flush=True)
      time.sleep(120)
"""


def test_a_script_past_its_timeout_is_stopped_and_fails_the_node(live_worker, make_recipe):
    run = services.start_run(make_recipe(SLOW, slug="slow-script"), actor=ENGINE, message="go")
    # Far less than the script's 120 s of sleep: the run fails because it was stopped.
    wait_run(run, "completed", "failed", "cancelled", timeout=90)
    assert run.status == "failed"
    assert "script timed out after 1s" in run.error
    node = run.nodes.get(node_id="slow")
    assert node.status == "failed" and "script timed out after 1s" in node.error
    assert "started" in node.output  # what it printed before it was stopped is kept
