"""Tools an agent can call while it runs, with one implementation behind every way in.

A tool is an `AgentTool` (name, description, JSON schema of its arguments, handler). The
executor binds the tools of a call to where the agent runs (`ToolContext`) in a `ToolBox`
and passes it in `AgentRequest.tools`:

- HTTP providers offer them as function tools and call `ToolBox.call` in-process;
- CLI agents reach the same `ToolBox` through the worker: while the agent runs,
  `runs.agent_tools.serve.serving` listens on a private unix socket, and
  `manage.py loop tool NAME --arg value` or `manage.py loop mcp` (an MCP stdio server)
  forward calls to it with the call's token. The agent's process needs no database
  access and sees no secret but that token.

This module imports nothing from Django: the client side (`client.py`, `mcp.py`) runs in
the agent's process, which has no console settings.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


class ToolError(Exception):
    """The tool refused the call. The message goes back to the agent, which can read it and
    try again; the run goes on."""


@dataclass(frozen=True)
class ToolContext:
    """Where a tool call comes from: the run, the node and iteration, the role."""

    run_id: int
    node_id: str = ""
    iteration_id: int | None = None
    role: str = ""
    extra: dict = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class AgentTool:
    name: str
    description: str
    # JSON schema of the arguments: {"type": "object", "properties": {...}, ...}
    parameters: dict
    handler: Callable[[ToolContext, dict], object]

    def spec(self) -> dict:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass(frozen=True)
class ToolResult:
    ok: bool
    content: str  # JSON text for structured results, else plain text


@dataclass
class ToolBox:
    """The tools one agent call may use, bound to its context."""

    context: ToolContext
    tools: list[AgentTool]
    # Called before and after every tool call: the executor keeps the lease alive and the
    # idle timer quiet while a tool works (a tool may run a whole pipeline).
    on_activity: Callable[[], None] | None = None

    def __bool__(self) -> bool:
        return bool(self.tools)

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.tools]

    def specs(self) -> list[dict]:
        return [t.spec() for t in self.tools]

    def get(self, name: str) -> AgentTool | None:
        return next((t for t in self.tools if t.name == name), None)

    def call(self, name: str, arguments: dict | str | None) -> ToolResult:
        """Run one call. Never raises for a bad call: the agent gets the reason as text."""
        tool = self.get(name)
        if tool is None:
            known = ", ".join(self.names) or "none"
            return ToolResult(False, f"unknown tool '{name}' (tools here: {known})")
        try:
            args = _arguments(arguments)
            problems = _check_arguments(tool.parameters, args)
            if problems:
                return ToolResult(False, f"{name}: " + "; ".join(problems))
            self._activity()
            value = tool.handler(self.context, args)
        except ToolError as exc:
            return ToolResult(False, str(exc))
        except Exception as exc:  # noqa: BLE001 - a tool's bug must not crash the agent's turn
            log.exception("tool %s failed in run %s", name, self.context.run_id)
            return ToolResult(False, f"{name} failed: {type(exc).__name__}: {exc}")
        finally:
            self._activity()
        return ToolResult(True, value if isinstance(value, str) else _json(value))

    def _activity(self) -> None:
        if self.on_activity is not None:
            self.on_activity()


def _arguments(arguments) -> dict:
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise ToolError(f"the arguments are not JSON: {exc.msg}") from None
    if not isinstance(arguments, dict):
        raise ToolError("the arguments must be a JSON object")
    return arguments


def _check_arguments(schema: dict, args: dict) -> list[str]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    return [
        (f"{'.'.join(map(str, e.absolute_path))}: " if e.absolute_path else "") + e.message
        for e in sorted(validator.iter_errors(args), key=lambda e: list(e.absolute_path))
    ][:5]


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
