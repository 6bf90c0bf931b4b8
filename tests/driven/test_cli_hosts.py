"""Hosts that are CLI agents drive a loop through a real worker: Claude Code and Codex reach
the three tools through the console's MCP server (`manage.py loop mcp`, as each CLI starts
MCP servers), a command agent from its shell (`$LOOP_TOOL_CMD ...` and `manage.py loop
tool ...` with LOOP_RUN_ID in its environment). One implementation behind all of them."""

from __future__ import annotations

import json

import pytest

from loops.driven.models import Loop
from runs.models import RunEvent
from tests.conftest import wait_run
from tests.driven.conftest import driven_recipe
from tests.providers.conftest import FAKE_CLAUDE, FAKE_CODEX

CALLS = [
    {"name": "core_start_loop", "arguments": {"pipeline": ["researcher", "drafter"]}},
    {"name": "core_iterate_loop", "arguments": {"feedback": "Say who it is for."}},
    {"name": "core_finish_loop", "arguments": {}},
]


def check_loop(run) -> Loop:
    assert run.status == "completed", run.error
    loop = Loop.objects.get(run=run)
    assert (loop.status, loop.iteration_count, loop.pipeline) == (
        "completed",
        2,
        ["researcher", "drafter"],
    )
    first, second = loop.iterations.order_by("number")
    assert first.input == "Widget 2.0"
    assert second.input == {"previousOutput": first.output, "feedback": "Say who it is for."}
    assert loop.result == second.output
    tools = [e.data["tool"] for e in RunEvent.objects.filter(run=run, kind="agent_tool")]
    assert [t for t in tools if t.startswith("core_")] == [
        "core_start_loop",
        "core_iterate_loop",
        "core_finish_loop",
    ]
    return loop


@pytest.fixture
def calls_file(tmp_path):
    path = tmp_path / "host-calls.json"
    path.write_text(json.dumps(CALLS))
    return path


def test_a_claude_code_host_drives_the_loop_over_mcp(live_worker, start_driven, calls_file):
    host = f'host-cli: {{kind: claude, command: "{FAKE_CLAUDE} --fake-tool-calls {calls_file}"}}'
    run = wait_run(start_driven(driven_recipe("host-cli", providers=host), message="Widget 2.0"))
    check_loop(run)


def test_a_codex_host_drives_the_loop_over_mcp(live_worker, start_driven, calls_file):
    host = f'host-cli: {{kind: codex, command: "{FAKE_CODEX} --fake-tool-calls {calls_file}"}}'
    run = wait_run(start_driven(driven_recipe("host-cli", providers=host), message="Widget 2.0"))
    check_loop(run)


def test_a_command_host_drives_the_loop_from_its_shell(live_worker, start_driven, tmp_path):
    script = tmp_path / "host.sh"
    script.write_text(
        "set -e\n"
        """$LOOP_TOOL_CMD core_start_loop --pipeline '["researcher", "drafter"]' > started.json\n"""
        '$LOOP_TOOL_CMD core_iterate_loop --feedback "Say who it is for."\n'
        "$LOOP_TOOL_CMD core_finish_loop\n"
        'echo "Finished loop $(python3 -c \'import json; print(json.load(open("started.json"))["loopId"])\') of run $LOOP_RUN_ID."\n'
    )
    host = f'host-cli: {{kind: command, command: "bash {script}"}}'
    run = wait_run(start_driven(driven_recipe("host-cli", providers=host), message="Widget 2.0"))
    loop = check_loop(run)
    answer = run.iterations.get(node_id="host").output
    assert f"Finished loop {loop.pk} of run {run.pk}." in answer
    assert '"status": "completed"' in answer  # what core_finish_loop printed
    assert "core_start_loop" in run.iterations.get(node_id="host").prompt
    assert "$LOOP_TOOL_CMD core_start_loop --pipeline" in run.iterations.get(node_id="host").prompt
