"""Loops over HTTP, read-only: `GET /api/loops` (filters session, agent, status) and
`GET /api/loops/{id}` → {loop, iterations[]}. A loop's session is the run that hosted it
(the driven run whose live stream carried its crumbs)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from django.http import Http404
from django.urls import reverse
from ninja import Field, Query, Router, Schema
from ninja import Path as PathParam

from console.api_errors import errors, require
from recipes.api import Text
from runs.api import MAX_ID, refuse_unknown_parameters
from runs.output_reads import output_url

from . import queries
from .models import Loop

router = Router(tags=["loops"])
LoopStatus = Literal[tuple(Loop.Status.values)]


class LoopFilters(Schema):
    session: int | None = Field(
        None, ge=1, le=MAX_ID, description="The run that hosted the loops (a driven run's id)"
    )
    agent: Text | None = Field(None, max_length=300, description="The host agent's id")
    status: LoopStatus | None = None
    cursor: int | None = Field(None, ge=1, le=MAX_ID, description="next_cursor of the last page")
    limit: int = Field(50, ge=1, le=200)


class LoopOut(Schema):
    id: int
    session: int
    recipe: str
    agent: str
    pipeline: list[str]
    input: Any = None
    max_iterations: int
    iterations: int
    can_iterate: bool
    status: str
    last_output: Any = None
    result: Any = None
    error: str
    started_at: datetime
    finished_at: datetime | None
    duration_ms: int | None
    url: str
    run_url: str


class StepOut(Schema):
    agent: str
    attempt: int
    iteration: int | None = Field(..., description="The step's id in /api/runs/{id}/iterations")
    number: int | None
    status: str | None
    output: str | None = Field(..., description="The end of the step's output")
    output_truncated: bool = Field(
        False, description="The output is longer than `output`: output_url gives all of it"
    )
    output_url: str | None = Field(None, description="The whole output as a text file")
    structured: Any = None
    error: str | None
    duration_ms: int | None


class LoopIterationOut(Schema):
    number: int
    status: str
    input: Any = None
    feedback: str
    output: Any = None
    output_truncated: bool = Field(
        False,
        description="The last step's output was longer than what the run kept: its steps' "
        "output_url gives all of it",
    )
    shown_output: Any = Field(
        None, description="What the host saw, when on_iteration_end replaced it"
    )
    replaced: bool
    error: str
    attempts: int
    started_at: datetime
    finished_at: datetime | None
    duration_ms: int | None
    steps: list[StepOut]


class LoopPageOut(Schema):
    items: list[LoopOut]
    next_cursor: int | None


class LoopDetailOut(Schema):
    loop: LoopOut
    iterations: list[LoopIterationOut]


def loop_out(request, loop: Loop) -> dict:
    finished = loop.finished_at
    return {
        "id": loop.pk,
        "session": loop.run_id,
        "recipe": loop.run.recipe.slug,
        "agent": loop.agent,
        "pipeline": loop.pipeline,
        "input": loop.input,
        "max_iterations": loop.max_iterations,
        "iterations": loop.iteration_count,
        "can_iterate": loop.can_iterate,
        "status": loop.status,
        "last_output": loop.last_output,
        "result": loop.result,
        "error": loop.error,
        "started_at": loop.started_at,
        "finished_at": finished,
        "duration_ms": int((finished - loop.started_at).total_seconds() * 1000)
        if finished
        else None,
        "url": request.build_absolute_uri(reverse("loop_detail", args=[loop.pk])),
        "run_url": request.build_absolute_uri(reverse("run_detail", args=[loop.run_id])),
    }


def step_out(step) -> dict:
    it = step.iteration
    return {
        "agent": step.agent,
        "attempt": step.attempt,
        "iteration": it.pk if it else None,
        "number": it.number if it else None,
        "status": it.status if it else None,
        "output": it.output_tail if it else None,
        "output_truncated": _cut(it),
        "output_url": output_url(it) if it else None,
        "structured": it.structured if it else None,
        "error": it.error if it else None,
        "duration_ms": it.duration_ms if it else None,
    }


def _cut(it) -> bool:
    """A step's output is longer than what the answer carries (or the run kept)."""
    if it is None:
        return False
    return it.output_truncated or (it.output_length or 0) > len(it.output_tail or "")


def iteration_out(view) -> dict:
    row = view.row
    return {
        "number": row.number,
        "status": row.status,
        "input": row.input,
        "feedback": row.feedback,
        "output": row.output,
        "output_truncated": bool(view.steps) and _cut(view.steps[-1].iteration),
        "shown_output": row.shown_output,
        "replaced": row.replaced,
        "error": row.error,
        "attempts": row.attempts,
        "started_at": row.started_at,
        "finished_at": row.finished_at,
        "duration_ms": row.duration_ms,
        "steps": [step_out(step) for step in view.steps],
    }


@router.get("", response={200: LoopPageOut, **errors(403, 422)}, summary="List loops, newest first")
def list_loops(request, filters: Query[LoopFilters]):
    require(request.auth, "runs.view_run")
    refuse_unknown_parameters(request, LoopFilters)
    page, next_cursor = queries.loop_page(
        session=filters.session,
        agent=filters.agent,
        status=filters.status,
        before=filters.cursor,
        limit=filters.limit,
        user=request.auth,  # the loops of the caller's projects' runs
    )
    return {"items": [loop_out(request, loop) for loop in page], "next_cursor": next_cursor}


@router.get(
    "/{loop_id}",
    response={200: LoopDetailOut, **errors(403, 404, 422)},
    summary="A loop and its iterations (input, output, timing, steps)",
)
def get_loop(request, loop_id: int = PathParam(..., ge=1, le=MAX_ID, description="The loop's id")):
    require(request.auth, "runs.view_run")
    try:
        view = queries.loop_detail(loop_id)
    except Loop.DoesNotExist:
        raise Http404("No such loop.") from None
    if not request.auth.has_perm("runs.view_run", view.loop.run):
        raise Http404("No such loop.")  # of a project the caller sees nothing of
    return {
        "loop": loop_out(request, view.loop),
        "iterations": [iteration_out(it) for it in view.iterations],
    }
