"""Every kind's output goes through the cap: a script node, a prompt node, a step machine's
turn, a driven loop's pipeline step and a Python agent call each print 10,000 bytes with
LOOP_MAX_OUTPUT_BYTES at 2,048. Each row keeps the end within the cap, its file holds all
of it, the log says so once, and what flows on (a pipeline's value, a script's result) is
the kept end. Run in this process (tasks delivered by the kernel's test broker), so the
small cap applies; the 30 MB path through a real worker is tests/engine_worker."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from runs import services, tasks
from runs.actor import ENGINE, Actor
from runs.models import Iteration, NodeRun, ProviderConfig, RunEvent

CAP = 2048
SIZE = 10_000


@pytest.fixture(autouse=True)
def small_cap(settings):
    settings.LOOP_MAX_OUTPUT_BYTES = CAP


def printing(letter: str) -> str:
    """A command printing SIZE bytes of `letter` (without a backslash: it goes into YAML)."""
    return f"head -c {SIZE} /dev/zero | tr -c {letter} {letter}"


def kept_and_filed(row, letter: str, field: str = "output") -> None:
    text = getattr(row, field)
    assert row.output_truncated and row.output_bytes == SIZE, (row, row.output_bytes)
    assert text == letter * CAP
    assert Path(django_settings.LOOP_DATA_DIR, row.output_file).read_text() == letter * SIZE


def said_once(run, step: str) -> None:
    said = RunEvent.objects.filter(run=run, kind="output_truncated", step=step)
    assert said.count() == 1 and said.get().data["at_bytes"] == CAP


def deliver(run, broker):
    tasks.advance_run(run.pk)
    broker.deliver()
    run.refresh_from_db()
    return run


def test_a_script_node(transactional_db, make_recipe, broker):
    source = f"""
name: script
nodes:
  - id: s
    runtime: uv
    script: |
      import sys
      sys.stdout.write("s" * {SIZE})
"""
    run = deliver(
        services.start_run(make_recipe(source, "script"), actor=ENGINE, message="m"), broker
    )
    assert run.status == "completed", run.error
    kept_and_filed(NodeRun.objects.get(run=run, node_id="s"), "s")
    said_once(run, "s")


def test_a_prompt_node(transactional_db, make_recipe, broker):
    source = f"""
name: prompt
providers:
  big: {{kind: command, command: "{printing("p")}"}}
nodes:
  - id: ask
    provider: big
    prompt: go
"""
    run = deliver(
        services.start_run(make_recipe(source, "prompt"), actor=ENGINE, message="m"), broker
    )
    assert run.status == "completed", run.error
    row = NodeRun.objects.get(run=run, node_id="ask")
    kept_and_filed(row, "p")
    assert row.state["raw"] == "p" * CAP  # the raw copy a loop_group reads is the end too
    said_once(run, "ask")


TURN = """
schema: planeai.loop.recipe.v1
id: big-turn
name: A turn that prints a lot
roles:
  maker: {provider: bigcmd, mode: readonly, isolation: readonly}
steps:
  - {id: start, kind: session.create, role: maker, prompt: "work"}
  - {id: wait, kind: handoff.wait, from: maker, on: {completed: done}}
  - {id: done, kind: loop.status, status: completed_unreviewed}
"""


def test_a_step_machine_turn(transactional_db, make_recipe, broker, operator):
    ProviderConfig.objects.create(name="bigcmd", kind="command", command=printing("t"))
    run = services.start_run(
        make_recipe(TURN, "big-turn"), actor=Actor.operator(operator, "console")
    )
    deliver(run, broker)
    turn = Iteration.objects.get(run=run, node_id="maker")
    assert turn.status == "completed", turn.error
    kept_and_filed(turn, "t", "raw_output")
    assert turn.output == "t" * CAP
    session = NodeRun.objects.get(pk=turn.node_run_id)
    assert session.output == "t" * CAP and session.output_file == turn.output_file
    said_once(run, "maker")


def test_a_driven_pipeline_step_hands_on_the_kept_end(transactional_db, make_recipe, broker):
    from loops.driven.models import LoopIteration
    from tests.driven.conftest import driven_recipe

    host = (
        "host-agent: {kind: demo, tool_calls: "
        "[{name: core_start_loop, arguments: {pipeline: [big]}}]}"
    )
    big = f'big-agent: {{kind: command, command: "{printing("d")}"}}'
    source = driven_recipe(
        "host-agent",
        pool="[researcher, drafter, big]",
        providers=host + "\n" + big,
        agents="big: {provider: big-agent, instructions: Say a lot.}",
    )
    run = deliver(
        services.start_run(make_recipe(source, "driven-big"), actor=ENGINE, message="m"), broker
    )
    step = Iteration.objects.get(run=run, node_id="big")
    assert step.status == "completed", step.error
    kept_and_filed(step, "d", "raw_output")
    assert LoopIteration.objects.get().output == "d" * CAP  # what the host was handed
    said_once(run, "big")


PYTHON = f'''"""A chatty agent"""
from loops.python import Agent
from tests.python.scripted import ScriptedProvider

workflow = Agent(
    "chatty", "Talk.", provider=ScriptedProvider(lambda request, count: "y" * {SIZE})
)
'''


def test_a_python_agent_call_returns_what_the_run_keeps(transactional_db, tmp_path):
    from tests.python.scripted import run_async
    from tests.python.test_gates import import_file

    path = tmp_path / "chatty_agent.py"
    path.write_text(PYTHON)
    try:
        module = import_file(path, "chatty_agent")
        result = run_async(module.workflow.run("go"))
    finally:
        sys.modules.pop("chatty_agent", None)
    call = Iteration.objects.get(node_id="chatty")
    kept_and_filed(call, "y")
    assert result.text == result.output == "y" * CAP  # the same as a replay reads back
    said_once(call.run, "chatty")
