"""What the HTTP providers share when a model calls tools: running a call, and the bound
on how many rounds of calls one turn may take."""

from __future__ import annotations

import json

from runs.agent_tools import ToolBox, ToolResult

from .base import ProviderError

# A turn that keeps calling tools ends here: a model in a loop of calls must not run
# forever. A driven loop's host needs about max_iterations + 2 rounds.
DEFAULT_MAX_TOOL_ROUNDS = 64


def max_tool_rounds(options: dict) -> int:
    try:
        return max(1, int(options.get("max_tool_rounds") or DEFAULT_MAX_TOOL_ROUNDS))
    except (TypeError, ValueError):
        return DEFAULT_MAX_TOOL_ROUNDS


def too_many_rounds(provider: str, rounds: int) -> ProviderError:
    return ProviderError(
        f"provider '{provider}': the agent was still calling tools after {rounds} rounds "
        "(raise max_tool_rounds in the provider's options if it needs more)"
    )


def call_tool(tools: ToolBox | None, name: str, arguments) -> ToolResult:
    if not tools:
        return ToolResult(False, f"no tool '{name}' here: this call offers no tools")
    return tools.call(name, arguments)


def parsed_arguments(arguments):
    """Arguments as the model sent them, decoded for display (the tool decodes its own)."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments or "{}")
        except ValueError:
            return arguments
    return arguments
