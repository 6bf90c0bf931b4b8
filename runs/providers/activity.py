"""Tool activity of CLI agents, recorded as run events (`agent_tool`) and shown live.

Agents like Claude Code and Codex run tools (shell commands, file edits) inside one
iteration; the run's event log is where a person reviewing the run looks for what
happened, so each tool call becomes an event beside the iteration's own events.
"""

from __future__ import annotations

import logging

from django.db import transaction

from .base import AgentRequest, OnChunk

log = logging.getLogger(__name__)
DETAIL_LIMIT = 500


def record_tool(request: AgentRequest, on_chunk: OnChunk, tool: str, detail: str, **data) -> None:
    detail = " ".join(str(detail).split())[:DETAIL_LIMIT]
    on_chunk(f"\n[{tool}] {detail}\n" if detail else f"\n[{tool}]\n")
    if not request.run_id:
        return
    from runs.models import Run

    try:
        with transaction.atomic():
            run = Run.objects.select_for_update().filter(pk=request.run_id).first()
            if run is None or run.is_terminal:
                return
            run.append_event(
                "agent_tool",
                request.node_id,
                iteration=request.iteration,
                tool=tool,
                detail=detail,
                **data,
            )
    except Exception:  # the event log is a courtesy here; never fail the agent for it
        log.exception("could not record tool activity for run %s", request.run_id)
