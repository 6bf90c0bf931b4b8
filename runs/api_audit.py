"""The audit of decisions over HTTP: `GET /api/audit/decisions` streams every answer at a
gate (runs.audit) as JSON Lines or CSV, filtered by date, recipe and project."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from django.http import StreamingHttpResponse
from ninja import Field, Query, Router, Schema
from pydantic import field_validator

from console.api_errors import errors, require
from console.projects import visible
from recipes.api import Text
from runs import audit

router = Router()


class AuditFilters(Schema):
    since: datetime | None = Field(None, description="Answers at or after this time")
    until: datetime | None = Field(None, description="Answers before this time")
    recipe: Text = Field("", max_length=200, description="Only this recipe's runs (its slug)")
    project: Text = Field("", max_length=100, description="Only this project's runs (its slug)")
    format: Literal["jsonl", "csv"] = Field("jsonl", description="JSON Lines or CSV")

    @field_validator("since", "until")
    @classmethod
    def _in_utc(cls, value: datetime | None) -> datetime | None:
        """As UTC (the database takes offsets of at most a day's hours; a time without
        one is UTC)."""
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        try:
            return value.astimezone(UTC)
        except OverflowError:
            raise ValueError("a time out of range") from None


@router.get(
    "/decisions",
    response={200: None, **errors(403, 422)},
    summary="Every decision at a gate: who, which, on which digest, from where",
    description=(
        "One record per answer, oldest first: at, run, recipe, gate, node, decision, text, "
        "by, via (console, api, cli, mcp, link, slack, sweep), digest (what the decision was "
        "made on, when given), closed_gate (false: an approval a quorum counted). Only the "
        "runs of the projects where you may read gates."
    ),
)
def decisions(request, filters: Query[AuditFilters]):
    require(request.auth, "runs.view_gate")
    found = audit.decisions(
        since=filters.since,
        until=filters.until,
        recipe=filters.recipe,
        project=filters.project,
    )
    found = visible(found, request.auth, "runs.view_gate", field="run__project")
    kind = "application/jsonl" if filters.format == "jsonl" else "text/csv"
    response = StreamingHttpResponse(audit.lines(found, filters.format), content_type=kind)
    response["Content-Disposition"] = f'attachment; filename="decisions.{filters.format}"'
    return response
