"""Every kind's agent call is the kernel's one call (runs/executor/agent.py): `request_for`
builds it and `run_call` runs it. A workflow's prompt step, loop iteration and loop_group
body step, a driven recipe's host and pipeline step, a step machine's turn and a Python
agent's call each reach their provider with the run's environment, the idle timeout their
recipe sets (else the one default), the network unless their node says `network: none`,
and the recipe's limits with the node's replacing them. Run in this process (the kernel's
test broker); the demo agent keeps every request it is sent."""

from __future__ import annotations

import ast
import sys
import threading
from pathlib import Path

import pytest

from runs import services, tasks
from runs.actor import ENGINE, Actor
from runs.executor.context import run_dirs
from runs.providers.base import DEFAULT_IDLE_TIMEOUT_MS
from runs.providers.demo import DemoProvider
from runs.sandbox import Limits

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_IDLE = DEFAULT_IDLE_TIMEOUT_MS / 1000
TOPIC = {"topic": "widgets"}


@pytest.fixture
def requests(monkeypatch) -> list:
    """Every request the demo agent is sent, in order (calls may come from threads)."""
    sent, lock = [], threading.Lock()
    original = DemoProvider.run

    def keeping(self, request, on_chunk):
        with lock:
            sent.append(request)
        return original(self, request, on_chunk)

    monkeypatch.setattr(DemoProvider, "run", keeping)
    return sent


def run_to_end(run, broker):
    tasks.advance_run(run.pk)
    broker.deliver()
    run.refresh_from_db()
    return run


def the_run_env(run, inputs: dict) -> dict:
    """What an agent of `run` finds in its environment, whatever its kind."""
    _, artifacts = run_dirs(run)
    return {
        "USER_MESSAGE": run.message,
        "ARGUMENTS": run.message,
        "WORKFLOW_ID": str(run.pk),
        "ARTIFACTS_DIR": str(artifacts),
        "BASE_BRANCH": "main",
        "DOCS_DIR": "docs/",
        **{f"INPUTS_{name.upper()}": value for name, value in inputs.items()},
    }


def one_call(requests, node_id: str):
    found = [r for r in requests if r.node_id == node_id]
    assert found, f"no call of {node_id}: {[r.node_id for r in requests]}"
    return found[0]


def assert_built_alike(request, run, *, inputs=TOPIC, idle=DEFAULT_IDLE, network=True, limits=None):
    assert request.run_id == run.pk
    assert request.env.items() >= the_run_env(run, inputs).items(), request.env
    assert request.idle_timeout == idle
    assert request.network is network
    assert request.limits == Limits.from_options(limits)


WORKFLOW = """
name: every agent call
provider: demo
inputs:
  topic: {default: trees}
limits: {cpu_seconds: 30, memory_mb: 1024}
nodes:
  - id: ask
    prompt: Say one thing about $INPUTS.topic.
    idle_timeout: 4000
    network: none
    limits: {memory_mb: 512}
  - id: again
    depends_on: [ask]
    idle_timeout: 5000
    loop:
      prompt: "More about $INPUTS.topic; output: COMPLETE after 1 iteration."
      until: COMPLETE
      max_iterations: 2
  - id: group
    depends_on: [again]
    loop_group:
      until: COMPLETE
      max_iterations: 2
      nodes:
        - id: body
          prompt: "The body on $INPUTS.topic; output: COMPLETE after 1 iteration."
          idle_timeout: 6000
"""


def test_a_workflow_s_steps_loops_and_group_bodies(transactional_db, make_recipe, broker, requests):
    recipe = make_recipe(WORKFLOW, "every-call")
    run = services.start_run(recipe, actor=ENGINE, message="go", inputs=TOPIC)
    assert run_to_end(run, broker).status == "completed", run.error
    recipe_limits = {"cpu_seconds": 30, "memory_mb": 1024}
    ask = one_call(requests, "ask")
    assert_built_alike(
        ask, run, idle=4.0, network=False, limits={"cpu_seconds": 30, "memory_mb": 512}
    )
    assert_built_alike(one_call(requests, "again"), run, idle=5.0, limits=recipe_limits)
    assert_built_alike(one_call(requests, "group.body"), run, idle=6.0, limits=recipe_limits)


DRIVEN = """
kind: driven
name: every agent call
provider: demo
inputs:
  topic: {default: trees}
agents:
  drafter: {instructions: Write about the topic., idle_timeout: 7000}
  host:
    instructions: Drive the loop until the note is good.
    idle_timeout: 8000
    loop: {pool: [drafter], max_iterations: 2}
host: host
"""


def test_a_driven_host_and_its_pipeline_steps(transactional_db, make_recipe, broker, requests):
    recipe = make_recipe(DRIVEN, "driven-every-call")
    run = services.start_run(recipe, actor=ENGINE, message="go", inputs=TOPIC)
    assert run_to_end(run, broker).status == "completed", run.error
    assert_built_alike(one_call(requests, "host"), run, idle=8.0)
    drafts = [r for r in requests if r.node_id == "drafter"]
    assert len(drafts) == 2  # one per iteration of the loop the host drove
    for request in drafts:
        assert_built_alike(request, run, idle=7.0)


STEP_MACHINE = """
schema: planeai.loop.recipe.v1
id: machine-every-call
name: Every agent call
inputs:
  topic: {default: trees}
limits: {cpu_seconds: 30}
roles:
  checker: {provider: demo, mode: review, isolation: readonly, network: none}
steps:
  - {id: check, kind: session.create, role: checker, prompt: "Look at {{ inputs.topic }}."}
  - {id: wait, kind: handoff.wait, from: checker, on: {completed: done}}
  - {id: done, kind: loop.status, status: completed_unreviewed}
"""


def test_a_step_machine_turn(transactional_db, make_recipe, broker, requests, operator):
    recipe = make_recipe(STEP_MACHINE, "machine-every-call")
    actor = Actor.operator(operator, "console")
    run = services.start_run(recipe, actor=actor, message="go", inputs=TOPIC)
    run_to_end(run, broker)
    turn = one_call(requests, "checker")
    assert_built_alike(turn, run, network=False, limits={"cpu_seconds": 30})
    # What the step machine adds for its roles, on top of the run's environment.
    assert turn.read_only and turn.env["LOOP_READ_ONLY"] == "1"
    assert turn.env["LOOP_ROLE"] == "checker" and turn.env["LOOP_RUN_ID"] == str(run.pk)


PYTHON = '''"""Every agent call"""
from loops.python import Agent

workflow = Agent("writer", "Write about the topic.", provider="demo")
'''


def test_a_python_agent_s_call(transactional_db, tmp_path, requests):
    from runs.models import Run
    from tests.python.scripted import run_async
    from tests.python.test_gates import import_file

    path = tmp_path / "every_call.py"
    path.write_text(PYTHON)
    try:
        run_async(import_file(path, "every_call").workflow.run("go"))
    finally:
        sys.modules.pop("every_call", None)
    run = Run.objects.get()
    assert_built_alike(one_call(requests, "writer"), run, inputs=run.inputs or {})


# The one builder, read from the code: nothing else makes a request or says the default.


def project_modules():
    for package in ("console", "recipes", "runs", "loops", "notifications"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text())


def test_only_the_kernel_s_builder_makes_an_agent_request():
    makers = []
    for name, tree in project_modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                called = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if called == "AgentRequest":
                    makers.append(f"{name}:{node.lineno}")
    assert [m.split(":")[0] for m in makers] == ["runs/executor/agent.py"], makers


def test_the_idle_timeout_default_is_said_once():
    said = [
        f"{name}:{node.lineno}"
        for name, tree in project_modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        for target in node.targets
        if "IDLE_TIMEOUT" in getattr(target, "id", "")
    ]
    assert [where.split(":")[0] for where in said] == ["runs/providers/base.py"], said
