"""Seed 002 (LoopWorkflow): the design's example, run as its book runs it (a plain script
with a top-level `await`) without the console, and as a recipe of the console (its
`workflow`, without the script's last line) through a real worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from loops.python.format import parse_python
from runs import services
from runs.actor import ENGINE
from tests.conftest import wait_run

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = Path(__file__).parent / "seed002" / "writer_reviewer.py"


def run_example(env: dict) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "tests.seeds.run_example", str(EXAMPLE)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


EXPECTED = {
    "status": "condition_met",
    "iterations": 3,
    "score": 85,
    "scores": [55, 70, 85],  # the demo reviewer's scores; the stop condition is score >= 80
    "agents": ["writer", "reviewer"] * 3,
}


def test_the_example_runs_as_a_plain_script_with_nothing_recorded():
    """docs/python.md: without the console's settings a workflow runs, recording nothing."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    assert run_example(env) == EXPECTED


def test_the_example_as_a_recipe_is_refused_at_its_top_level_await():
    result = parse_python(EXAMPLE.read_text(), "writer-reviewer")
    (problem,) = result.errors
    assert problem.line == 38 and "'await' outside function" in problem.message


TWICE = """
import asyncio
from loops.python import Agent, LoopWorkflow
writer = Agent(name="writer", instructions="Write.", provider="demo")
workflow = LoopWorkflow(agents=[writer], stop_condition=lambda r, i: i >= 2, max_iterations=3)
print(asyncio.run(workflow.run("one")).status, asyncio.run(workflow.run("two")).status)
"""


def test_a_plain_script_runs_workflows_one_after_another_with_nothing_recorded():
    """The first run imports the console's modules (which set DJANGO_SETTINGS_MODULE as a
    side effect); the second must still run without the console."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        [sys.executable, "-c", TWICE], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["condition_met", "condition_met"]


def test_the_examples_workflow_runs_as_a_recipe_through_a_worker(
    live_worker, make_recipe, tmp_path
):
    """A recipe defines `workflow`; the console runs it (the script's `await` line is the
    script's part, which a recipe leaves out: docs/recipes.md, deliberate differences)."""
    source = EXAMPLE.read_text().replace(
        'result = await workflow.run("Write marketing copy")\n', ""
    )
    path = tmp_path / "writer_reviewer.py"
    path.write_text(source)
    recipe = make_recipe(source, slug="writer-reviewer", origin="project", source_path=str(path))
    assert recipe.kind == "python"
    run = services.start_run(recipe, actor=ENGINE, message="Write marketing copy")
    wait_run(run, "completed", "failed", timeout=120)
    assert run.status == "completed", run.error
    workflow = run.nodes.get(node_id="workflow")
    assert workflow.state["ended"] == "condition_met"
    reviews = run.iterations.filter(node_id="reviewer").order_by("number")
    assert [it.structured["score"] for it in reviews] == [55, 70, 85]  # stops at >= 80
    first = run.iterations.get(node_id="writer", number=1)
    assert "Write marketing copy" in first.prompt
    assert "Write marketing copy" not in run.iterations.get(node_id="writer", number=2).prompt
