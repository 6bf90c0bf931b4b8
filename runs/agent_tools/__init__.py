"""Tools an agent can call while it runs, with one implementation behind every way in.

A tool is an `AgentTool` (name, description, JSON schema of its arguments, handler). The
executor binds the tools of a call to where the agent runs (`ToolContext`) in a `ToolBox`
and passes it in `AgentRequest.tools`:

- HTTP providers offer them as function tools and call `ToolBox.call` in-process;
- CLI agents reach the same `ToolBox` through the worker: while the agent runs,
  `runs.agent_tools.serve.serving` listens on a private unix socket, and
  `manage.py loop tool NAME --arg value` or `manage.py loop mcp` (an MCP stdio server),
  both answered by `relay/loop_tools.py`, forward calls to it with the call's token. The
  agent's process needs no database access and sees no secret but that token.

This module imports nothing from Django; the client side (`relay/loop_tools.py`, standard
library only) runs in the agent's process, which has no console settings.
"""

from __future__ import annotations

import json
import logging
import threading
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
    # Called before and after every tool call, and whenever a tool reports progress
    # (`touch`): the executor keeps the agent's lease alive while a tool works (a tool may
    # run a whole pipeline of other agents).
    on_activity: Callable[[], None] | None = None
    # Every call made (name, arguments, ok), for providers whose agent reaches the tools
    # outside their own protocol (a command's shell): they report these.
    calls_made: list[tuple[str, dict, bool]] = field(default_factory=list, init=False, repr=False)
    _in_flight: int = field(default=0, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __bool__(self) -> bool:
        return bool(self.tools)

    @property
    def busy(self) -> bool:
        """A call is running: the agent waiting for its answer is not idle (a CLI agent
        prints nothing meanwhile, and must not be ended by its idle timeout)."""
        return self._in_flight > 0

    def touch(self) -> None:
        """A tool's long work made progress (a pipeline step streamed output)."""
        self._activity()

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.tools]

    def specs(self) -> list[dict]:
        return [t.spec() for t in self.tools]

    def get(self, name: str) -> AgentTool | None:
        return next((t for t in self.tools if t.name == name), None)

    def call(self, name: str, arguments: dict | str | None) -> ToolResult:
        """Run one call. Never raises for a bad call: the agent gets the reason as text.
        What `on_activity` raises (the work was cancelled) does propagate: the agent stops."""
        tool = self.get(name)
        if tool is None:
            known = ", ".join(self.names) or "none"
            return ToolResult(False, f"unknown tool '{name}' (tools here: {known})")
        try:
            args = _arguments(arguments)
        except ToolError as exc:
            return ToolResult(False, str(exc))
        problems = _check_arguments(tool.parameters, args)
        if problems:
            return ToolResult(False, f"{name}: " + "; ".join(problems))
        self._activity()
        with self._lock:
            self._in_flight += 1
        try:
            value = tool.handler(self.context, args)
            result = ToolResult(True, value if isinstance(value, str) else _json(value))
        except ToolError as exc:
            result = ToolResult(False, str(exc))
        except Exception as exc:  # a tool's bug must not crash the agent's turn
            log.exception("tool %s failed in run %s", name, self.context.run_id)
            result = ToolResult(False, f"{name} failed: {type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._in_flight -= 1
        self.calls_made.append((name, args, result.ok))
        self._activity()
        return result

    def _activity(self) -> None:
        if self.on_activity is not None:
            self.on_activity()


def busy_check(toolbox: ToolBox | None) -> Callable[[], bool] | None:
    """For a provider's idle timer: whether a tool call of `toolbox` is running."""
    if not toolbox:
        return None
    return lambda: toolbox.busy


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
