"""Deciding at a run's pending gate over HTTP: respond (one of the gate's decisions, by
id), and the older approve (a comment asks for another iteration) and reject. Mounted on /runs beside runs.api; every decision goes through
runs.services with surface="api", exactly as the console's buttons do.
"""

from __future__ import annotations

from ninja import Field, Router

from console.api_errors import JsonObject, errors
from recipes.api import Text
from runs import services
from runs.actor import Actor
from runs.api import MAX_ID, RunId, RunOut, readable_run, run_out
from runs.models.gate import COMMENT_LIMIT

router = Router()


class ApproveIn(JsonObject):
    comment: Text = Field("", max_length=COMMENT_LIMIT, description="Feedback: iterate again")
    decision: Text = Field("", max_length=100, description="For approvals with decisions")
    gate: int | None = Field(
        None, ge=1, le=MAX_ID, description="The gate you saw; refused if it is no longer pending"
    )
    record_only: bool = Field(
        False,
        description="Record the decision and leave the run paused; POST .../resume goes on with it",
    )


class RespondIn(JsonObject):
    # Not required by the schema: who may not decide hears 403 before a word on the body.
    decision: Text = Field("", max_length=100, description="The id of one of the gate's decisions")
    text: Text = Field("", max_length=COMMENT_LIMIT, description="Required where it says so")
    digest: Text = Field(
        "",
        max_length=64,
        description="The gate's digest you decided on; 409 if what it shows changed since",
    )
    gate: int | None = Field(None, ge=1, le=MAX_ID)


class RejectIn(JsonObject):
    reason: Text = Field("", max_length=COMMENT_LIMIT)
    gate: int | None = Field(None, ge=1, le=MAX_ID)


def body_or_empty(request, payload, schema):
    """An optional body may be absent, but a body that is not a JSON object is malformed."""
    if payload is None:
        if request.body.strip():
            raise services.ServiceError("The body must be a JSON object, or empty.")
        return schema()
    return payload


@router.post(
    "/{run_id}/approve",
    response={200: RunOut, **errors(400, 403, 404, 409, 422)},
    summary="Approve at the pending gate; a comment asks for another iteration",
)
def approve(request, payload: ApproveIn | None = None, run_id: int = RunId):
    run = readable_run(request, run_id)
    actor = Actor.operator(request.auth, "api")
    payload = body_or_empty(request, payload, ApproveIn)
    gate = services.gate_for_decision(run, payload.gate)
    services.approve(
        gate.pk,
        actor,
        comment=payload.comment,
        decision=payload.decision,
        record_only=payload.record_only,
    )
    run.refresh_from_db()
    return run_out(request, run)


@router.post(
    "/{run_id}/reject",
    response={200: RunOut, **errors(400, 403, 404, 409, 422)},
    summary="Reject at the pending gate (the node fails)",
)
def reject(request, payload: RejectIn | None = None, run_id: int = RunId):
    run = readable_run(request, run_id)
    actor = Actor.operator(request.auth, "api")
    payload = body_or_empty(request, payload, RejectIn)
    gate = services.gate_for_decision(run, payload.gate)
    services.reject(gate.pk, actor, reason=payload.reason)
    run.refresh_from_db()
    return run_out(request, run)


@router.post(
    "/{run_id}/respond",
    response={200: RunOut, **errors(400, 403, 404, 409, 422)},
    summary="Answer the pending gate with one of its decisions (by id)",
)
def respond(request, payload: RespondIn | None = None, run_id: int = RunId):
    """The one verb of every gate: `decision` is an id of the gate's `decisions` (its
    declared ones, else accept / feedback / reject, or approve / reject). An unknown id is
    422 with the list; a stale `digest` is 409 saying what changed. An approval that leaves
    a quorum short keeps the gate waiting (its `approvals` counts it)."""
    run = readable_run(request, run_id)
    actor = Actor.operator(request.auth, "api")
    payload = body_or_empty(request, payload, RespondIn)
    gate = services.gate_for_decision(run, payload.gate)
    services.respond(gate.pk, actor, payload.decision, text=payload.text, digest=payload.digest)
    run.refresh_from_db()
    return run_out(request, run)
