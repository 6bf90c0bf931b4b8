"""Every step of a run, body steps of loop_group iterations included: what each was asked
(the prompt as sent), what it answered, and what it cost."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal, InvalidOperation

from ninja import Field, Query, Router, Schema

from console.api_errors import errors
from recipes.api import Text
from runs.api import (
    MAX_ID,
    OUTPUT_HELP,
    PROMPT_HELP,
    STDERR_HELP,
    TRUNCATED_HELP,
    URL_HELP,
    RunId,
    readable_run,
    refuse_unknown_parameters,
)
from runs.models import NodeRun
from runs.output_reads import api_output, api_prompt, api_stderr, bounded_page
from runs.queries import with_usage

router = Router()


class StepOut(Schema):
    id: int
    node: str
    kind: str
    group_iteration: int | None = Field(..., description="The loop_group iteration, if a body step")
    generation: int
    status: str
    prompt: str = Field(..., description=PROMPT_HELP)
    prompt_truncated: bool
    output: str = Field(..., description=OUTPUT_HELP)
    output_truncated: bool = Field(..., description=TRUNCATED_HELP)
    output_url: str = Field(..., description=URL_HELP)
    stderr: str = Field(..., description=STDERR_HELP)
    stderr_truncated: bool
    error: str
    tokens_in: int | None
    tokens_out: int | None
    cost_usd: Decimal | None
    started_at: datetime | None
    finished_at: datetime | None


class StepPageOut(Schema):
    items: list[StepOut]
    next_cursor: int | None


class StepFilters(Schema):
    node: Text | None = Field(None, max_length=300, description="A node id, e.g. loop.write")
    cursor: int | None = Field(None, ge=0, le=MAX_ID)
    limit: int = Field(100, ge=1, le=500)


def _count(value) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _cost(value) -> Decimal | None:
    try:
        return Decimal(value) if value is not None else None
    except (InvalidOperation, TypeError):
        return None


def step_dict(row: NodeRun) -> dict:
    """One step for the API. Its state (which holds its prompt and raw output) is not
    loaded: the few values it needs are read from it by the database."""
    return {
        "id": row.pk,
        "node": row.node_id,
        "kind": row.kind,
        "group_iteration": row.iteration or None,
        "generation": row.generation,
        "status": row.status,
        **api_prompt(row),
        **api_output(row),
        **api_stderr(row),
        "error": row.error,
        "tokens_in": _count(row.used_in),
        "tokens_out": _count(row.used_out),
        "cost_usd": _cost(row.used_cost),
        "started_at": row.started_at,
        "finished_at": row.finished_at,
    }


@router.get(
    "/{run_id}/steps",
    response={200: StepPageOut, **errors(403, 404, 422)},
    summary="Every step of a run in order, loop_group body steps of every iteration included",
)
def list_steps(request, filters: Query[StepFilters], run_id: int = RunId):
    run = readable_run(request, run_id)
    refuse_unknown_parameters(request, StepFilters)
    rows = NodeRun.objects.filter(run=run).order_by("id")
    if filters.node:
        rows = rows.filter(node_id=filters.node)
    if filters.cursor:
        rows = rows.filter(id__gt=filters.cursor)
    rows = with_usage(rows)
    page, more = bounded_page(rows, filters.limit, "output", "prompt", "stderr")
    return {"items": [step_dict(row) for row in page], "next_cursor": page[-1].pk if more else None}
