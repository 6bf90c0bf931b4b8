"""The audit of decisions over HTTP: `GET /api/audit/decisions` streams every answer at a
gate (runs.audit) as JSON Lines or CSV, filtered by date and recipe."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from django.http import StreamingHttpResponse
from ninja import Field, Query, Router, Schema

from console.api_errors import errors, require
from runs import audit

router = Router()


class AuditFilters(Schema):
    since: datetime | None = Field(None, description="Answers at or after this time")
    until: datetime | None = Field(None, description="Answers before this time")
    recipe: str = Field("", max_length=200, description="Only this recipe's runs (its slug)")
    format: Literal["jsonl", "csv"] = Field("jsonl", description="JSON Lines or CSV")


@router.get(
    "/decisions",
    response={200: None, **errors(403, 422)},
    summary="Every decision at a gate: who, which, on which digest, from where",
    description=(
        "One record per answer, oldest first: at, run, recipe, gate, node, decision, text, "
        "by, via (console, api, cli, mcp, link, slack, sweep), digest (what the decision was "
        "made on, when given), closed_gate (false: an approval a quorum counted)."
    ),
)
def decisions(request, filters: Query[AuditFilters]):
    require(request.auth, "runs.view_gate")
    found = audit.decisions(since=filters.since, until=filters.until, recipe=filters.recipe)
    kind = "application/jsonl" if filters.format == "jsonl" else "text/csv"
    response = StreamingHttpResponse(audit.lines(found, filters.format), content_type=kind)
    response["Content-Disposition"] = f'attachment; filename="decisions.{filters.format}"'
    return response
