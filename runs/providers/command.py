"""Any command-line agent that reads the prompt on stdin and writes its answer to stdout.

The console's tools (`AgentRequest.tools`) are served while the command runs: its
environment carries LOOP_TOOL_CMD, so a script calls `$LOOP_TOOL_CMD NAME --arg value`
(or `manage.py loop tool NAME ...`), and LOOP_MCP_CMD for an MCP client it starts itself.
"""

from __future__ import annotations

import shlex
import uuid

from runs.agent_tools import busy_check
from runs.engine.shell_context import unsafe_references
from runs.sandbox import run_process

from .activity import toolbox_records
from .base import AgentRequest, AgentResult, OnChunk, ProviderError
from .cli import agent_call, named_files


class CommandProvider:
    structured_output = "best_effort"

    def __init__(self, name: str, command: str):
        if not command or not command.strip():
            raise ProviderError(f"provider '{name}' has no command to run")
        self.name = name
        self.command = command

    def run(self, request: AgentRequest, on_chunk: OnChunk) -> AgentResult:
        # Checked again here: a recipe saved before the check, or an admin's command.
        if problems := unsafe_references(self.command):
            first = problems[0]
            raise ProviderError(f"provider '{self.name}': line {first.line}: {first.explanation}")
        session_id = request.session_id or uuid.uuid4().hex
        env = {
            **request.env,
            "LOOP_SESSION_ID": session_id,
            "LOOP_SESSION_RESUME": "1" if request.session_id else "0",
            "LOOP_MODEL": request.model or "",
            "LOOP_ITERATION": str(request.iteration),
            "LOOP_NODE_ID": request.node_id,
        }
        try:
            with agent_call(request, ["bash"], named_files(self.command)) as (space, tool_env):
                result = run_process(
                    ["bash", "-c", self.command],
                    sandbox=space,
                    stdin_text=request.prompt,
                    env={**env, **tool_env},
                    on_chunk=on_chunk,
                    idle_timeout=request.idle_timeout,
                    busy=busy_check(request.tools),
                )
        except FileNotFoundError as exc:
            raise ProviderError(
                f"provider '{self.name}': cannot start {self.command!r}: {exc}"
            ) from exc
        tool_calls = toolbox_records(request.tools)
        if result.timed_out:
            return AgentResult(
                text=result.output, session_id=session_id, timed_out=True, tool_calls=tool_calls
            )
        # One line: what the agent printed is already the iteration's output, shown once
        # there; the command itself is in the provider's configuration.
        if result.exit_code == 127:
            program = shlex.split(self.command)[0] if self.command.strip() else self.command
            raise ProviderError(f"provider '{self.name}': command not found: {program} (exit 127)")
        if result.exit_code != 0:
            raise ProviderError(
                f"provider '{self.name}': the command exited with status {result.exit_code}"
                + _last_line(result.output)
            )
        return AgentResult(text=result.output, session_id=session_id, tool_calls=tool_calls)


def _last_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return f" ({lines[-1].strip()[:200]})" if lines else ""
