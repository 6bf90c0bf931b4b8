"""Tool activity of agents: shown live in the stream, returned in the result.

Agents run tools inside one call: a CLI's own (shell commands, file edits), and the
console's (`runs.agent_tools`). The run's event log is where a person reviewing the run
looks for what happened, so the executor records each call the provider returns as an
`agent_tool` event beside the iteration's own events (providers return, they never write).
"""

from __future__ import annotations

import json

from .base import OnChunk

DETAIL_LIMIT = 500


def tool_record(tool: str, detail: str, **data) -> dict:
    """One tool call as the result reports it (and the `agent_tool` event records it)."""
    return {"tool": tool, "detail": " ".join(str(detail).split())[:DETAIL_LIMIT], **data}


def tool_event(on_chunk: OnChunk, tool: str, detail: str, **data) -> dict:
    """Show one tool call in the live output; the record to return in the result."""
    record = tool_record(tool, detail, **data)
    on_chunk(f"\n[{tool}] {record['detail']}\n" if record["detail"] else f"\n[{tool}]\n")
    return record


def toolbox_records(tools) -> list[dict]:
    """The calls an agent made to the console's tools (`ToolBox.calls_made`), as records."""
    if not tools:
        return []
    return [
        tool_record(name, summarize_arguments(args), ok=ok) for name, args, ok in tools.calls_made
    ]


def summarize_arguments(arguments) -> str:
    """The part of a tool's arguments a person wants to read first."""
    if not isinstance(arguments, dict):
        return str(arguments or "")
    for key in ("command", "file_path", "path", "pattern", "url", "description"):
        if arguments.get(key):
            return str(arguments[key])
    return json.dumps(arguments, ensure_ascii=False)[:200]
