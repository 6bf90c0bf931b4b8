"""Step-machine runs over HTTP, under /api/runs: handoffs (the same service as the CLI and
the agent's tool), the machine's state, and a tick. Mounted by console/api.py as this kind's
`api_router` (loops/stepmachine/surfaces.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Field, Router, Schema, Status

from console.api_errors import InvalidInputsOut, JsonObject, errors
from loops.stepmachine.spec import HANDOFF_SCHEMA
from recipes.api import Text
from runs import services
from runs.actor import Actor
from runs.api import RunId, readable_run

from .handoffs import record_handoff as record
from .queries import handoffs_of, status_of

router = Router(tags=["step machines"])


class HandoffIn(JsonObject):
    role: Text = Field(..., max_length=100)
    status: Text = Field(..., max_length=40, description="completed, blocked, needs_human, failed")
    summary: Text = Field("", max_length=100_000)
    data: dict[str, Any] | None = None
    schema_: Text = Field(HANDOFF_SCHEMA, alias="schema", max_length=100)


class HandoffOut(Schema):
    id: int
    role: str
    status: str
    summary: str
    data: dict[str, Any] | None
    schema_: str | None = Field(None, alias="schema")
    seq: int
    recorded_by: str | None
    surface: str
    recorded_at: datetime | None
    consumed_at: datetime | None
    consumed_by_step: str | None
    standing: str | None


class MachineOut(Schema):
    id: int
    recipe: str
    status: str
    meaning: str
    started: bool
    repository: str
    current_step: dict[str, str] | None
    round: int
    max_rounds: int | None
    ticks: int
    max_ticks: int | None
    waiting: str
    stale: bool
    last_progress_at: str | None
    last_error: str
    last_handoff_consumed_at: str | None
    error: str
    sessions: list[dict[str, Any]]
    handoffs: list[HandoffOut]
    review: dict[str, Any] | None


def _step_machine(request, run_id: int):
    return _of_step_machine(readable_run(request, run_id))


def _of_step_machine(run):
    if run.recipe.kind != "planeai":
        raise services.Conflict(f"Run {run.pk} is not a step-machine run.")
    return run


def _operated_step_machine(request, run_id: int) -> tuple:
    """A run to change: another project's is missing whatever the role (404), then the
    operator role in its project (403), then its kind (409)."""
    run = readable_run(request, run_id)
    actor = Actor.operator(request.auth, "api")
    actor.check("runs.operate_run", run)
    return _of_step_machine(run), actor


@router.post(
    "/{run_id}/handoffs",
    response={201: HandoffOut, 422: InvalidInputsOut, **errors(400, 403, 404, 409)},
    summary="Record a role's handoff on a step-machine run",
    by_alias=True,
)
def record_handoff(request, payload: HandoffIn, run_id: int = RunId):
    run, actor = _operated_step_machine(request, run_id)
    handoff = record(
        run.pk,
        role=payload.role,
        status=payload.status,
        summary=payload.summary,
        data=payload.data,
        schema=payload.schema_,
        actor=actor,
    )
    return Status(201, handoff.as_dict())


@router.get(
    "/{run_id}/handoffs",
    response={200: list[HandoffOut], **errors(403, 404, 409, 422)},
    summary="A step-machine run's latest handoffs, newest first",
    by_alias=True,
)
def list_handoffs(request, run_id: int = RunId):
    return [h.as_dict() for h in handoffs_of(_step_machine(request, run_id))]


@router.get(
    "/{run_id}/machine",
    response={200: MachineOut, **errors(403, 404, 409, 422)},
    summary="A step-machine run: status, current step, round, ticks, sessions, handoffs",
    by_alias=True,
)
def machine(request, run_id: int = RunId):
    return status_of(_step_machine(request, run_id))


@router.post(
    "/{run_id}/tick",
    response={200: MachineOut, **errors(403, 404, 409, 422)},
    summary="Advance a step-machine run (start it, or run its current step and what follows)",
    by_alias=True,
)
def tick(request, run_id: int = RunId):
    from loops.stepmachine import services as step_machine
    from loops.stepmachine.queries import status_of

    run, actor = _operated_step_machine(request, run_id)
    step_machine.tick(run, actor)
    run.refresh_from_db()
    return status_of(run)
