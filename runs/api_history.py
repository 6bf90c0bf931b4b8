"""A run's history over HTTP: fork from an iteration, compare two iterations, the
convergence chart as JSON, and the budget (read, change, resume after a budget stop).
Changes go through runs.services with surface="api", as the console's buttons do."""

from __future__ import annotations

from typing import Any

from ninja import Field, Query, Router, Schema, Status

from console.api_errors import JsonObject, errors, require
from recipes.api import Text
from runs import budget as run_budget
from runs import chart as charts
from runs import compare as comparing
from runs import services
from runs.actor import Actor
from runs.api import (
    MAX_ID,
    RunId,
    UnknownParameter,
    readable_run,
    refuse_unknown_parameters,
    run_url,
)
from runs.fork import PROMPT_LIMIT
from runs.models.gate import COMMENT_LIMIT

router = Router()
iterations_router = Router()  # /api/iterations/...: comparisons may span two runs


class ForkIn(JsonObject):
    node: Text = Field(
        ..., max_length=300, description="The loop's node id (a Python agent's path)"
    )
    iteration: int = Field(..., ge=1, le=100_000, description="The iteration to fork after")
    feedback: Text = Field("", max_length=COMMENT_LIMIT, description="For the next iteration")
    prompt: Text = Field(
        "", max_length=PROMPT_LIMIT, description="A new prompt from the next iteration on"
    )


class ForkOut(Schema):
    id: int
    status: str
    url: str
    forked_from: int
    node: str
    iteration: int


class CompareFilters(Schema):
    # Required, but checked after the caller's role: who may not read learns nothing more.
    a: int | None = Field(None, ge=1, le=MAX_ID, description="An iteration id (required)")
    b: int | None = Field(
        None, ge=1, le=MAX_ID, description="Another iteration id, same recipe (required)"
    )


class ChartFilters(Schema):
    node: Text | None = Field(None, max_length=300)
    metric: Text | None = Field(
        None, max_length=200, description="score, field:NAME, duration, tokens or cost"
    )


class BudgetIn(JsonObject):
    cost_usd: Any = Field(None, description="US dollars; null or empty removes the limit")
    tokens: Any = None
    wall_seconds: Any = None
    iterations: Any = None
    resume: bool = Field(False, description="Go on after a budget stop")


class LimitOut(Schema):
    limit: str
    allowed: str
    spent: str
    percent: int
    warning: bool
    reached: bool = Field(description="All of it spent: no further iteration may start")
    exceeded: bool = Field(description="Reached, and the run stopped by it (budget_exceeded)")


class BudgetOut(Schema):
    run: int
    status: str
    budget: dict[str, Any]
    limits: list[LimitOut]
    message: str


def budget_out(run) -> dict:
    return {
        "run": run.pk,
        "status": run.status_word,
        "budget": run.budget,
        "limits": [state.as_dict() for state in run_budget.limits(run)],
        "message": run.error if run.status == "budget_exceeded" else "",
    }


@router.post(
    "/{run_id}/fork",
    response={201: ForkOut, **errors(400, 403, 404, 409, 422)},
    summary="Fork a run after one of its iterations, with new feedback or a new prompt",
)
def fork(request, payload: ForkIn, run_id: int = RunId):
    run = readable_run(request, run_id)
    actor = Actor.operator(request.auth, "api")
    new = services.fork_run(
        run,
        actor,
        node=payload.node,
        iteration=payload.iteration,
        feedback=payload.feedback,
        prompt=payload.prompt,
    )
    return Status(
        201,
        {
            "id": new.pk,
            "status": new.status_word,
            "url": run_url(request, new),
            "forked_from": run.pk,
            "node": payload.node,
            "iteration": payload.iteration,
        },
    )


@iterations_router.get(
    "/compare",
    response={200: dict[str, Any], **errors(403, 404, 409, 422)},
    summary="Compare two iterations (of one run or two runs of one recipe)",
)
def compare(request, filters: Query[CompareFilters]):
    require(request.auth, "runs.view_run")
    refuse_unknown_parameters(request, CompareFilters)
    if filters.a is None or filters.b is None:
        raise UnknownParameter("Name the two iterations to compare: ?a=ID&b=ID.")
    a, b = readable_iteration(request, filters.a), readable_iteration(request, filters.b)
    return comparing.as_dict(a, b, comparing.compare(a, b))


def readable_iteration(request, pk: int):
    """An iteration of a run the caller may read; else as one that does not exist."""
    found = comparing.iteration(pk)
    if not request.auth.has_perm("runs.view_run", found.run):
        raise services.NotFound(f"No iteration {pk}.")
    return found


@router.get(
    "/{run_id}/chart",
    response={200: dict[str, Any], **errors(403, 404, 422)},
    summary="Per loop, per iteration: the chosen number, duration, tokens and cost",
)
def chart(request, filters: Query[ChartFilters], run_id: int = RunId):
    run = readable_run(request, run_id)
    refuse_unknown_parameters(request, ChartFilters)
    found = charts.run_chart(run, node=filters.node)
    if filters.metric:
        found = charts.run_chart(
            run, node=filters.node, metrics={s.node_id: filters.metric for s in found}
        )
    return {"run": run.pk, "loops": [charts.as_dict(series) for series in found]}


@router.get(
    "/{run_id}/budget",
    response={200: BudgetOut, **errors(403, 404, 422)},
    summary="The run's budget and what it spent",
)
def get_budget(request, run_id: int = RunId):
    return budget_out(readable_run(request, run_id))


@router.put(
    "/{run_id}/budget",
    response={200: BudgetOut, **errors(400, 403, 404, 409, 422)},
    summary="Change the run's limits (with resume: go on after a budget stop)",
)
def set_budget(request, payload: BudgetIn, run_id: int = RunId):
    run = readable_run(request, run_id)
    actor = Actor.operator(request.auth, "api")
    given = payload.model_dump(exclude_unset=True)
    resume = given.pop("resume", False)
    limits = {k: ("" if v is None else v) for k, v in given.items()}
    run = services.set_budget(run, actor, limits, resume=resume)
    run.refresh_from_db()
    return budget_out(run)
