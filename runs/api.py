"""Runs over HTTP: start, list, follow, cancel, resume (deciding at gates: runs.api_gates),
and the inbox's ranking of what needs attention (`inbox_router`, GET /api/inbox).

Every change goes through runs.services with surface="api", exactly as the console's
buttons do, so who may approve and what approve means is decided in one place.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from django.urls import reverse
from ninja import Field, Query, Router, Schema, Status
from ninja import Path as PathParam
from pydantic import field_validator

from console.api_errors import InvalidInputsOut, JsonObject, errors, require
from recipes.api import Text, recipe_for
from runs import inbox, services, waiting
from runs.actor import Actor
from runs.models import Iteration, Run
from runs.output_reads import api_output, api_prompt, bounded_page
from runs.queries import one_snapshot, take_page
from runs.serializers import run_summary

router = Router()
inbox_router = Router()

MAX_ID = 2**63 - 1
RunId = PathParam(..., ge=1, le=MAX_ID, description="The run's id")


# --- schemas -------------------------------------------------------------------------------


class RunStartIn(JsonObject):
    recipe: Text = Field(..., max_length=100, description="The recipe's slug")
    message: Text = Field(
        "", description=f"At most {services.MESSAGE_LIMIT:,} characters: more is refused (422)."
    )
    inputs: dict[str, Any] = Field(default_factory=dict)
    budget: dict[str, Any] | None = Field(
        None, description="Limits for this run: cost_usd, tokens, wall_seconds, iterations"
    )
    repository: Text = Field(
        "",
        max_length=1000,
        description="Step machines: the git repository to work in (one of LOOP_REPOSITORIES "
        "or a demo repository; default: the first of LOOP_REPOSITORIES)",
    )


class RunCreatedOut(Schema):
    id: int
    status: str
    url: str


STATUS_HELP = "Where the run is: its kind's phase when it has one (verifying), else its status"
PHASE_HELP = "Its kind's own word for where it is (a step machine's), or empty"


class RunRowOut(Schema):
    id: int
    recipe: str
    version: int
    status: str = Field(..., description=STATUS_HELP)
    phase: str = Field("", description=PHASE_HELP)
    message: str
    started_by: str | None = Field(..., description="The account that started it, if any")
    starter: str = Field(
        "",
        description="Who started it as every page says it: an account, the command line, "
        "a schedule or a webhook",
    )
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    url: str


class RunPageOut(Schema):
    items: list[RunRowOut]
    next_cursor: int | None


OUTPUT_HELP = (
    "The end of the output: an answer's outputs and prompts share 512 KB (or "
    "LOOP_MAX_OUTPUT_BYTES if smaller)"
)
TRUNCATED_HELP = "The output is longer than `output`: output_url gives all of it"
URL_HELP = "The whole output as a text file (same read permission as the run)"
PROMPT_HELP = "The prompt as sent (its start, when the answer's texts pass their bound)"
STDERR_HELP = (
    "What a bash or script step wrote to stderr, kept apart from its output (which is "
    "stdout): its end, bounded with the answer's outputs"
)


class NodeOut(Schema):
    node: str
    kind: str
    status: str
    iterations: int
    max_iterations: int | None
    output: str = Field(..., description=OUTPUT_HELP)
    output_truncated: bool = Field(..., description=TRUNCATED_HELP)
    output_url: str = Field(..., description=URL_HELP)
    stderr: str = Field("", description=STDERR_HELP)
    stderr_truncated: bool = False
    error: str
    child_runs: list[int] = []


class ParentOut(Schema):
    run: int
    node: str
    item: int | None


class GateOut(Schema):
    id: int
    node: str
    iteration: int | None
    kind: str
    message: str
    completion_signaled: bool
    status: str
    decisions: list[dict[str, Any]] = Field(..., description="The decisions the recipe declares")
    offered_decisions: list[dict[str, Any]] = Field(
        ...,
        description="What POST .../respond takes: {id, label, text_required, then} each (the "
        "declared decisions, else the gate's default set)",
    )
    digest: str = Field(
        "", description="The digest of what the gate shows now; send it with respond"
    )
    approvals_needed: int = Field(1, description="Distinct people who must approve")
    approvals: list[dict[str, Any]] = Field(
        [], description="Approvals counted so far while a quorum is short"
    )
    result: dict[str, Any] | None = Field(
        None, description="Once decided: {decision, text, by, via}"
    )
    created_at: datetime | None = Field(None, description="When the gate opened")
    deadline_at: datetime | None = Field(None, description="gate_timeout: decide by then")
    on_timeout: str | None = Field(None, description="What the sweep does at the deadline")
    reminded_at: datetime | None = Field(None, description="When the reminder was sent")
    escalate_to: list[str] = Field([], description="Told at the first deadline (escalation)")
    escalated_at: datetime | None = Field(None, description="When it was escalated")
    timeout_decision: str | None = Field(None, description="The decision the deadline takes")


class ProviderWaitOut(Schema):
    iteration: int
    node: str
    number: int
    provider: str
    ahead: int
    since: datetime | None
    words: str = Field(..., description='"waiting for provider NAME (3 ahead)"')


class RunOut(Schema):
    id: int
    recipe: str
    version: int
    status: str = Field(..., description=STATUS_HELP)
    phase: str = Field("", description=PHASE_HELP)
    message: str
    inputs: dict[str, Any]
    error: str
    started_by: str | None = Field(..., description="The account that started it, if any")
    starter: str = Field(
        "",
        description="Who started it as every page says it: an account, the command line, "
        "a schedule or a webhook",
    )
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    url: str
    parent: ParentOut | None = None
    nodes: list[NodeOut]
    pending_gate: GateOut | None
    waiting_for_provider: list[ProviderWaitOut] = Field(
        default_factory=list,
        description="Its iterations waiting for their provider's limits (shared by every "
        "worker): which provider and how many wait ahead, as the run page says it",
    )
    trace_id: str | None = Field(
        None,
        description="The run's OpenTelemetry trace id (32 hex digits) when runs are exported "
        "as traces (docs/operations.md), else null",
    )


SCORE_HELP = "A scored loop's number for this iteration (its recipe's `score:`); null if none"
SCORE_DETAIL_HELP = (
    "Where the score came from: `source` (field, bash, judge or python), a judge's `reason` "
    "and `judge` (its call's usage); null if none"
)


class IterationOut(Schema):
    id: int
    node: str
    number: int
    generation: int
    status: str
    prompt: str = Field(..., description=PROMPT_HELP)
    prompt_truncated: bool
    feedback: str
    after_gate: bool
    output: str = Field(..., description=OUTPUT_HELP)
    output_truncated: bool = Field(..., description=TRUNCATED_HELP)
    output_url: str = Field(..., description=URL_HELP)
    structured: Any = None
    channels: list[str]
    error: str
    session_id: str
    tokens_in: int | None
    tokens_out: int | None
    cost_usd: Decimal | None
    score: float | None = Field(None, description=SCORE_HELP)
    score_detail: dict[str, Any] | None = Field(None, description=SCORE_DETAIL_HELP)
    waiting_for: str = Field(
        "", description="A pending iteration waiting for this provider's limits, else empty"
    )
    waiting_ahead: int | None = Field(None, description="How many wait ahead of it")
    attempts: int
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: int | None


class IterationPageOut(Schema):
    items: list[IterationOut]
    next_cursor: int | None


class EventOut(Schema):
    seq: int
    kind: str
    step: str
    data: dict[str, Any]
    at: datetime | None


class EventPageOut(Schema):
    items: list[EventOut]
    next_after: int = Field(..., description="Pass as ?after= to read what follows")
    run_status: str


class RunFilters(Schema):
    q: Text | None = Field(None, max_length=200, description="Search run messages")
    status: Text | None = Field(
        None, max_length=40, description="A status a run shows: the kernel's, or a kind's phase"
    )
    recipe: Text | None = Field(None, max_length=100, description="A recipe's slug")
    cursor: int | None = Field(None, ge=1, le=MAX_ID, description="next_cursor of the last page")
    limit: int = Field(50, ge=1, le=200)

    @field_validator("status")
    @classmethod
    def _a_status_a_run_shows(cls, value):
        if value is not None and value not in Run.status_words():
            raise ValueError(f"must be one of: {', '.join(Run.status_words())}")
        return value


class WaitIn(Schema):
    timeout: float = Field(
        waiting.DEFAULT_SECONDS,
        ge=0,
        le=waiting.MOST_SECONDS,
        description=f"Seconds to wait at most (default {waiting.DEFAULT_SECONDS}, at most "
        f"{waiting.MOST_SECONDS}); 0 answers at once",
    )


WAIT_STATE_HELP = (
    "completed: the run completed (a step machine's `approved` too); ended: it failed or was "
    "cancelled; needs_person: a gate waits for a decision, or the run stopped until a person "
    "steps in (paused, its budget, a step machine's blocked or needs_human); running: the "
    "timeout passed first"
)


class RunWaitOut(Schema):
    state: Literal[waiting.STATES] = Field(..., description=WAIT_STATE_HELP)  # its four words
    reason: str = Field(..., description="Why, in a few words (the gate that waits, the error)")
    run: RunOut


class InboxItemOut(Schema):
    rank: int = Field(..., description="1 is the most urgent")
    kind: Literal[inbox.ITEM_KINDS] = Field(
        ...,
        description="gate: waits for a decision; needs_person: a run waits for a person; "
        "running: a run pending or running",
    )
    why: Literal[inbox.TIERS] = Field(
        ...,
        description="What ranked it: a gate's deadline, the run's burn rate, a loop about "
        "to plateau, or how long it has waited",
    )
    reason: str = Field(..., description="Why, in the words of its inbox row")
    run: int
    recipe: str
    status: str = Field(..., description=STATUS_HELP)
    starter: str
    gate: int | None = Field(None, description="The gate's id (kind gate)")
    gate_kind: str | None = Field(None, description="loop, approval or budget")
    node: str | None = Field(None, description="The gate's node, or the loop about to plateau")
    iteration: int | None = None
    deadline_at: datetime | None = Field(None, description="A gate's deadline")
    burn_usd_per_minute: float | None = Field(
        None, description="The run's cost per minute since it started; null: no cost reported"
    )
    since: datetime = Field(
        ..., description="Waiting (a gate opened, a run stopped) or running since"
    )
    url: str = Field(..., description="Where to act: the gate's page, the offered action, the run")


class InboxOut(Schema):
    items: list[InboxItemOut]


class IterationFilters(Schema):
    node: Text | None = Field(None, max_length=300)
    cursor: int | None = Field(None, ge=0, le=MAX_ID)
    limit: int = Field(50, ge=1, le=200)


# --- helpers -------------------------------------------------------------------------------


class UnknownParameter(services.ServiceError):
    status = 422


def refuse_unknown_parameters(request, *schemas) -> None:
    """A misspelt filter (`?stauts=failed`) must not quietly return every run."""
    known = {name for schema in schemas for name in schema.model_fields}
    unknown = sorted(set(request.GET) - known)
    if unknown:
        raise UnknownParameter(
            f"Unknown query parameter{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}."
            f" Accepted: {', '.join(sorted(known))}."
        )


def require_scope(user, perm: str) -> None:
    """A token whose scope does not allow `perm` is refused saying so, before anything is
    looked up."""
    token = getattr(user, "api_token", None)
    if token is not None and not token.allows(perm):
        require(user, perm)


def run_url(request, run: Run) -> str:
    return request.build_absolute_uri(reverse("run_detail", args=[run.pk]))


def readable_run(request, run_id: int) -> Run:
    """The run, when the caller may read it: one of a project they have nothing in answers
    as one that does not exist (404, the same words)."""
    require(request.auth, "runs.view_run")
    runs = Run.objects.select_related("recipe", "recipe_version", "project")
    found = runs.filter(pk=run_id).first()
    if found is None:
        raise services.NotFound(f"No run {run_id}.")
    Actor("api", request.auth).check("runs.view_run", found)
    return found


def run_out(request, run: Run) -> dict:
    return {**run_summary(run), "url": run_url(request, run)}


# --- endpoints -----------------------------------------------------------------------------


@router.post(
    "",
    response={201: RunCreatedOut, 422: InvalidInputsOut, **errors(400, 403, 404, 409)},
    summary="Start a run",
)
def start(request, payload: RunStartIn):
    require(request.auth, "runs.view_run")  # no role at all: 403
    require_scope(request.auth, "runs.operate_run")  # a token whose scope may not: 403
    recipe = recipe_for(request.auth, payload.recipe)  # another project's, whatever the role
    require(request.auth, "runs.operate_run")  # start_run checks it in the recipe's project
    actor = Actor("api", request.auth)
    run = services.start_run(
        recipe,
        actor=actor,
        message=payload.message,
        inputs=payload.inputs,
        budget=payload.budget,
        repository=payload.repository or "",
    )
    return Status(201, {"id": run.pk, "status": run.status_word, "url": run_url(request, run)})


@router.get("", response={200: RunPageOut, **errors(403, 422)}, summary="List runs, newest first")
def list_runs(request, filters: Query[RunFilters]):
    require(request.auth, "runs.view_run")
    refuse_unknown_parameters(request, RunFilters)
    runs = Run.objects.visible_to(request.auth).select_related(
        "recipe", "recipe_version", "started_by"
    )
    runs = runs.order_by("-id")
    if filters.status:
        runs = runs.filter(Run.showing(filters.status))
    if filters.recipe:
        runs = runs.filter(recipe__slug=filters.recipe)
    if filters.q:
        runs = runs.filter(message__icontains=filters.q)
    if filters.cursor:
        runs = runs.filter(id__lt=filters.cursor)
    page, more = take_page(runs, filters.limit)
    items = [
        {
            "id": r.pk,
            "recipe": r.recipe.slug,
            "version": r.recipe_version.number,
            "status": r.status_word,
            "phase": r.phase,
            "message": r.message,
            "started_by": r.started_by.get_username() if r.started_by_id else None,
            "starter": r.starter,
            "created_at": r.created_at,
            "started_at": r.started_at,
            "finished_at": r.finished_at,
            "url": run_url(request, r),
        }
        for r in page
    ]
    return {"items": items, "next_cursor": page[-1].pk if more else None}


@router.get(
    "/{run_id}",
    response={200: RunOut, **errors(403, 404, 422)},
    summary="A run with its nodes and its pending gate",
)
def get_run(request, run_id: int = RunId):
    with one_snapshot():
        return run_out(request, readable_run(request, run_id))


@router.get(
    "/{run_id}/wait",
    response={200: RunWaitOut, **errors(403, 404, 422)},
    summary="Wait until the run needs a person or ends (a long-poll)",
    description=(
        "Answers as soon as the run needs a person (needs_person) or has ended (completed, "
        f"ended), at once if it already has; else after `timeout` seconds (default "
        f"{waiting.DEFAULT_SECONDS}, at most {waiting.MOST_SECONDS}) with `running`. Ask "
        "again to go on waiting."
    ),
)
def wait_for_run(request, params: Query[WaitIn], run_id: int = RunId):
    run = readable_run(request, run_id)
    refuse_unknown_parameters(request, WaitIn)  # `?timout=5` must not wait 30 s
    result = waiting.wait_for_person(run, params.timeout)
    with one_snapshot():
        return {"state": result.state, "reason": result.reason, "run": run_out(request, run)}


@router.get(
    "/{run_id}/iterations",
    response={200: IterationPageOut, **errors(403, 404, 422)},
    summary="A run's iterations in order (filter by node)",
)
def list_iterations(request, filters: Query[IterationFilters], run_id: int = RunId):
    run = readable_run(request, run_id)
    rows = Iteration.objects.filter(run=run).order_by("id")
    if filters.node:
        rows = rows.filter(node_id=filters.node)
    if filters.cursor:
        rows = rows.filter(id__gt=filters.cursor)
    page, more = bounded_page(rows, filters.limit, "output", "prompt")
    items = [
        {
            "id": it.pk,
            "node": it.node_id,
            "number": it.number,
            "generation": it.generation,
            "status": it.status,
            **api_prompt(it),
            "feedback": it.feedback,
            "after_gate": it.after_gate,
            **api_output(it),
            "structured": it.structured,
            "channels": it.channels or [],
            "error": it.error,
            "session_id": it.session_id,
            "tokens_in": it.tokens_in,
            "tokens_out": it.tokens_out,
            "cost_usd": it.cost_usd,
            "score": it.score,
            "score_detail": it.score_detail,
            "waiting_for": it.waiting_words and it.waiting_for,
            "waiting_ahead": it.waiting_ahead if it.waiting_words else None,
            "attempts": it.attempts,
            "started_at": it.started_at,
            "finished_at": it.finished_at,
            "duration_ms": it.duration_ms,
        }
        for it in page
    ]
    return {"items": items, "next_cursor": page[-1].pk if more else None}


@router.get(
    "/{run_id}/events",
    response={200: EventPageOut, **errors(403, 404, 422)},
    summary="The run's event log after a sequence number",
)
def list_events(
    request,
    run_id: int = RunId,
    after: int = Query(0, ge=0, le=MAX_ID),
    limit: int = Query(200, ge=1, le=1000),
):
    run = readable_run(request, run_id)
    events = list(run.events.filter(seq__gt=after).order_by("seq")[:limit])
    return {
        "items": [e.as_dict() for e in events],
        "next_after": events[-1].seq if events else after,
        "run_status": run.status_word,
    }


@router.post(
    "/{run_id}/cancel", response={200: RunOut, **errors(403, 404, 409, 422)}, summary="Cancel"
)
def cancel(request, run_id: int = RunId):
    run = readable_run(request, run_id)
    run = services.cancel_run(run, Actor.operator(request.auth, "api"))
    return run_out(request, run)


@router.post(
    "/{run_id}/resume",
    response={200: RunOut, **errors(403, 404, 409, 422)},
    summary="Resume a failed or cancelled run",
)
def resume(request, run_id: int = RunId):
    run = readable_run(request, run_id)
    run = services.resume_run(run, Actor.operator(request.auth, "api"))
    return run_out(request, run)


@inbox_router.get(
    "",
    response={200: InboxOut, **errors(403, 422)},
    summary="What needs attention, most urgent first (the inbox's order)",
    description=(
        "Pending gates, runs waiting for a person and runs running, ranked as the inbox ranks "
        "them: gates with a deadline (soonest or most overdue first), then by the run's burn "
        "rate (cost per minute since it started), then running loops whose plateau stop rule "
        "one more flat iteration fires, then the rest (longest waiting first). Each item says "
        "why in `reason`, as its inbox row does."
    ),
)
def get_inbox(request):
    require(request.auth, "runs.view_run")
    if request.GET:
        raise UnknownParameter(
            f"GET /api/inbox takes no query parameter (given: {', '.join(sorted(request.GET))})."
        )
    with one_snapshot():
        ranked = inbox.ranked_attention(user=request.auth)
    return {"items": [{**i.as_dict(), "url": request.build_absolute_uri(i.path)} for i in ranked]}
