"""Claude Code, Codex and plain-command agents driven through a real worker, against fakes
that speak the CLIs' JSON-lines protocols: what the real CLIs (tests/providers/
test_real_*.py) cannot be made to do on demand — the exact argv, schemas enforced by the
CLI, an overload retried, a fresh session per iteration."""

from __future__ import annotations

from runs.executor.context import run_dirs
from runs.models import RunEvent
from tests.conftest import wait_run
from tests.providers.conftest import (
    FAKE_CLAUDE,
    FAKE_CODEX,
    FAKE_COMMAND,
    fake_calls,
    iterations,
    node,
    seen_streaming,
)


def loop_recipe(kind: str, command: str, *, fresh: bool, extra: str = "", until: str = "") -> str:
    until = until or "until: COMPLETE"
    return f"""
name: {kind}-loop
provider: agent
providers:
  agent: {{kind: {kind}, command: "{command}"}}
nodes:
  - id: work
{extra}
    loop:
      prompt: "Do the next step. When finished, output: COMPLETE"
      {until}
      max_iterations: 3
      fresh_context: {"true" if fresh else "false"}
"""


SCHEMA = """    output_format:
      type: object
      properties:
        done: {type: boolean}
        summary: {type: string}
      required: [done, summary]"""


# --- Claude Code ---------------------------------------------------------------------------


def test_claude_fresh_context_starts_a_new_session_each_iteration(live_worker, start):
    run = wait_run(start(loop_recipe("claude", str(FAKE_CLAUDE), fresh=True)))
    assert run.status == "completed", run.error
    first, second = iterations(run)
    assert all("--resume" not in call["argv"] for call in fake_calls(run, ".fake-claude"))
    assert first.session_id != second.session_id
    assert "turn 1 of session" in second.raw_output


def test_claude_gets_the_schema_and_its_structured_output_ends_the_loop(live_worker, start):
    source = loop_recipe(
        "claude", str(FAKE_CLAUDE), fresh=False, extra=SCHEMA, until="until_field: done"
    )
    run = wait_run(start(source))
    assert run.status == "completed", run.error
    calls = fake_calls(run, ".fake-claude")
    assert all("--json-schema" in call["argv"] for call in calls)
    assert "## Output format" not in calls[0]["prompt"]  # enforced: no schema in the prompt
    first, second = iterations(run)
    assert first.structured == {"done": False, "summary": "fake"}
    assert second.structured == {"done": True, "summary": "fake"} and second.channels == [
        "until_field"
    ]
    assert node(run).structured == {"done": True, "summary": "fake"}


def test_claude_auth_error_fails_the_node_at_once(live_worker, start):
    run = wait_run(start(loop_recipe("claude", f"{FAKE_CLAUDE} --fake-fail auth", fresh=False)))
    assert run.status == "failed"
    assert "Invalid API key" in node(run).error
    assert len(fake_calls(run, ".fake-claude")) == 1  # permanent: no retry


def test_claude_overloaded_is_retried_within_the_iteration(live_worker, start):
    command = f"{FAKE_CLAUDE} --fake-fail overloaded-once --fake-complete-after 2"
    run = wait_run(start(loop_recipe("claude", command, fresh=False)))
    assert run.status == "completed", run.error
    (only,) = iterations(run)
    assert len(fake_calls(run, ".fake-claude")) == 2
    assert "transient error, retrying" not in only.output


def test_a_missing_binary_is_named_on_the_node(live_worker, start):
    run = wait_run(start(loop_recipe("claude", "/nowhere/claude", fresh=False)))
    assert run.status == "failed"
    assert "`/nowhere/claude` was not found" in node(run).error


# --- Codex ---------------------------------------------------------------------------------


def test_codex_streams_resumes_its_thread_and_records_usage(live_worker, start):
    run = start(loop_recipe("codex", f"{FAKE_CODEX} --fake-delay 0.3", fresh=False))
    seen_streaming(run, "Fake Codex turn 1")
    wait_run(run)
    assert run.status == "completed", run.error
    first, second = iterations(run)
    calls = fake_calls(run, ".fake-codex")
    assert "resume" not in calls[0]["argv"]
    assert calls[1]["argv"][-2:] == ["resume", first.session_id]
    assert "turn 2 of session" in second.raw_output
    assert first.tokens_out == 17 and first.tokens_in
    assert RunEvent.objects.filter(run=run, kind="agent_tool", data__tool="command").count() == 2


def test_codex_fresh_context_and_output_schema(live_worker, start):
    source = loop_recipe(
        "codex", str(FAKE_CODEX), fresh=True, extra=SCHEMA, until="until_field: done"
    )
    run = wait_run(start(source))
    assert run.status == "completed", run.error
    calls = fake_calls(run, ".fake-codex")
    assert all("resume" not in call["argv"] for call in calls)
    assert calls[0]["schema"]["required"] == ["done", "summary"]
    first, second = iterations(run)
    assert first.session_id != second.session_id
    assert second.structured == {"done": True, "summary": "fake"}


def test_codex_turn_failure_is_permanent_and_clear(live_worker, start):
    run = wait_run(start(loop_recipe("codex", f"{FAKE_CODEX} --fake-fail auth", fresh=False)))
    assert run.status == "failed"
    assert "401 Unauthorized" in node(run).error
    assert len(fake_calls(run, ".fake-codex")) == 1


# --- a plain command -----------------------------------------------------------------------


def test_command_streams_and_threads_its_session(live_worker, start, tmp_path):
    # The agent holds its last word until the test has seen the first ones while the
    # iteration runs: streaming is shown on a busy machine too, without a timing window.
    # The hold file is in the run's working folder: the agent's sandbox sees nothing else.
    agent = f"{FAKE_COMMAND} --fake-delay 0.1 --fake-hold go"
    source = loop_recipe("command", agent, fresh=False).replace(
        "until: COMPLETE", "until_bash: test $(wc -l < .fake-command/calls.jsonl) -ge 2"
    )
    run = start(source)
    seen_streaming(run, "Fake command call 1")
    (run_dirs(run)[0] / "go").touch()
    wait_run(run)
    assert run.status == "completed", run.error
    first, second = iterations(run)
    calls = fake_calls(run, ".fake-command")
    assert [c["resumed"] for c in calls] == [False, True]
    assert calls[1]["session_id"] == first.session_id == second.session_id


def test_command_structured_output_is_repaired_by_a_reask(live_worker, start):
    source = loop_recipe(
        "command", str(FAKE_COMMAND), fresh=False, extra=SCHEMA, until="until_field: done"
    )
    run = wait_run(start(source))
    assert run.status == "completed", run.error
    (only,) = iterations(run)
    calls = fake_calls(run, ".fake-command")
    assert len(calls) == 2  # the answer and one re-ask, within one iteration
    assert "did not produce valid structured output" in calls[1]["prompt"]
    assert calls[1]["resumed"] is False  # the re-ask runs in a throwaway session
    assert only.structured == {"done": True, "summary": "fake"}
    assert node(run).output == '{"done": true, "summary": "fake"}'
