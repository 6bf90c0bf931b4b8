"""Schedules and webhooks over HTTP: listed by viewers, set up by editors (the admin's
rules: a model's `clean`)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from django.core.exceptions import ValidationError
from ninja import Router, Schema, Status

from console.api_errors import InvalidInputsOut, errors, require
from console.projects import visible
from recipes.api import recipe_for
from runs.actor import Actor
from runs.api import refuse_unknown_parameters
from runs.errors import NotFound

from . import schedules
from .models import Schedule, Webhook, new_secret

router = Router()
CONCURRENCY = Literal["skip", "queue", "cancel_previous"]


class Filters(Schema):
    recipe: str = ""  # a recipe's slug


class ScheduleIn(Schema):
    recipe: str
    name: str
    cron: str = ""
    every_seconds: int | None = None
    timezone: str = "UTC"
    message: str = ""
    inputs: dict = {}
    budget: dict = {}
    repository: str = ""
    concurrency: CONCURRENCY = "skip"
    enabled: bool = True


class SchedulePatch(Schema):
    name: str | None = None
    cron: str | None = None
    every_seconds: int | None = None
    timezone: str | None = None
    message: str | None = None
    inputs: dict | None = None
    budget: dict | None = None
    repository: str | None = None
    concurrency: CONCURRENCY | None = None
    enabled: bool | None = None


class ScheduleOut(Schema):
    id: int
    recipe: str
    name: str
    cron: str
    every_seconds: int | None
    timezone: str
    message: str
    inputs: dict
    budget: dict
    repository: str
    concurrency: str
    enabled: bool
    last_fired_at: datetime | None
    next_firing_at: datetime | None


def schedule_out(schedule: Schedule) -> dict:
    return {
        **{f: getattr(schedule, f) for f in ScheduleOut.model_fields if hasattr(schedule, f)},
        "recipe": schedule.recipe.slug,
        "next_firing_at": schedules.next_firing(schedule),
    }


class WebhookIn(Schema):
    recipe: str
    name: str
    signature: Literal["github", "generic"] = "github"
    event_header: str = "X-GitHub-Event"
    delivery_header: str = "X-GitHub-Delivery"
    events: list[str] = []
    filters: dict = {}
    inputs: dict[str, str] = {}
    message: str = ""
    repository: str = ""
    per_minute: int = 30
    enabled: bool = True


class WebhookPatch(Schema):
    name: str | None = None
    events: list[str] | None = None
    filters: dict | None = None
    inputs: dict[str, str] | None = None
    message: str | None = None
    repository: str | None = None
    per_minute: int | None = None
    enabled: bool | None = None
    new_secret: bool = False


class WebhookOut(Schema):
    id: int
    recipe: str
    name: str
    path: str
    signature: str
    event_header: str
    delivery_header: str
    events: list[str]
    filters: dict
    inputs: dict
    message: str
    repository: str
    per_minute: int
    enabled: bool
    secret: str | None = None  # only when it is made (created, or new_secret)


def webhook_out(webhook: Webhook, *, with_secret: bool = False) -> dict:
    fields = {f: getattr(webhook, f) for f in WebhookOut.model_fields if hasattr(webhook, f)}
    return {
        **fields,
        "recipe": webhook.recipe.slug,
        "secret": webhook.secret if with_secret else None,
    }


def _saved(row, user=None):
    """`row` checked as the admin checks it, then saved; 422 with each field's words."""
    try:
        row.full_clean(exclude=["recipe", "created_by", "key"])
    except ValidationError as exc:
        return Status(
            422,
            {
                "detail": "The settings are not valid.",
                "errors": {k: " ".join(v) for k, v in exc.message_dict.items()},
            },
        )
    if user is not None and not row.pk:
        row.created_by = user
    row.save()
    return None


def trigger_for(user, model, pk: int, perm: str):
    """A schedule or webhook (`model`) by its id, when `user` may `perm` on it: one of a
    project they see nothing of answers as one that does not exist (404, the same words),
    one they may only see, 403. Both belong to their recipe's project."""
    found = model.objects.select_related("recipe__project").filter(pk=pk).first()
    seen_with = f"triggers.view_{model._meta.model_name}"
    if found is None or not user.has_perm(seen_with, found):
        raise NotFound(f"No {model._meta.verbose_name} {pk}.")
    Actor("api", user).check(perm, found.recipe)
    return found


def listed(model, user, recipe: str):
    """The schedules or webhooks of the projects where `user` may see them."""
    rows = model.objects.select_related("recipe")
    rows = visible(rows, user, f"triggers.view_{model._meta.model_name}", field="recipe__project")
    return rows.filter(recipe__slug=recipe) if recipe else rows


@router.get("/schedules", response={200: list[ScheduleOut], **errors(403)}, summary="Schedules")
def list_schedules(request, recipe: str = ""):
    require(request.auth, "triggers.view_schedule")
    refuse_unknown_parameters(request, Filters)
    return [schedule_out(s) for s in listed(Schedule, request.auth, recipe)]


@router.post(
    "/schedules",
    response={201: ScheduleOut, 422: InvalidInputsOut, **errors(403, 404)},
    summary="Create a schedule (editors)",
)
def create_schedule(request, payload: ScheduleIn):
    require(request.auth, "triggers.add_schedule")
    data = payload.dict()
    schedule = Schedule(
        recipe=recipe_for(request.auth, data.pop("recipe"), "triggers.add_schedule"), **data
    )
    return _saved(schedule, request.auth) or Status(201, schedule_out(schedule))


@router.get(
    "/schedules/{schedule_id}",
    response={200: ScheduleOut, **errors(403, 404)},
    summary="A schedule",
)
def get_schedule(request, schedule_id: int):
    require(request.auth, "triggers.view_schedule")
    return schedule_out(trigger_for(request.auth, Schedule, schedule_id, "triggers.view_schedule"))


@router.patch(
    "/schedules/{schedule_id}",
    response={200: ScheduleOut, 422: InvalidInputsOut, **errors(403, 404)},
    summary="Change a schedule, or pause it with enabled: false (editors)",
)
def change_schedule(request, schedule_id: int, payload: SchedulePatch):
    require(request.auth, "triggers.change_schedule")
    schedule = trigger_for(request.auth, Schedule, schedule_id, "triggers.change_schedule")
    for field, value in payload.dict(exclude_unset=True).items():
        setattr(schedule, field, value)
    return _saved(schedule) or schedule_out(schedule)


@router.delete(
    "/schedules/{schedule_id}",
    response={204: None, **errors(403, 404)},
    summary="Delete a schedule",
)
def delete_schedule(request, schedule_id: int):
    require(request.auth, "triggers.delete_schedule")
    trigger_for(request.auth, Schedule, schedule_id, "triggers.delete_schedule").delete()
    return Status(204, None)


@router.get("/webhooks", response={200: list[WebhookOut], **errors(403)}, summary="Webhooks")
def list_webhooks(request, recipe: str = ""):
    require(request.auth, "triggers.view_webhook")
    refuse_unknown_parameters(request, Filters)
    return [webhook_out(w) for w in listed(Webhook, request.auth, recipe)]


@router.post(
    "/webhooks",
    response={201: WebhookOut, 422: InvalidInputsOut, **errors(403, 404)},
    summary="Create a webhook; its secret is in this answer only (editors)",
)
def create_webhook(request, payload: WebhookIn):
    require(request.auth, "triggers.add_webhook")
    data = payload.dict()
    webhook = Webhook(
        recipe=recipe_for(request.auth, data.pop("recipe"), "triggers.add_webhook"), **data
    )
    return _saved(webhook, request.auth) or Status(201, webhook_out(webhook, with_secret=True))


@router.get(
    "/webhooks/{webhook_id}", response={200: WebhookOut, **errors(403, 404)}, summary="A webhook"
)
def get_webhook(request, webhook_id: int):
    require(request.auth, "triggers.view_webhook")
    return webhook_out(trigger_for(request.auth, Webhook, webhook_id, "triggers.view_webhook"))


@router.patch(
    "/webhooks/{webhook_id}",
    response={200: WebhookOut, 422: InvalidInputsOut, **errors(403, 404)},
    summary="Change a webhook; new_secret: true makes a new secret, in this answer only",
)
def change_webhook(request, webhook_id: int, payload: WebhookPatch):
    require(request.auth, "triggers.change_webhook")
    webhook = trigger_for(request.auth, Webhook, webhook_id, "triggers.change_webhook")
    changes = payload.dict(exclude_unset=True)
    renew = changes.pop("new_secret", False)
    for field, value in changes.items():
        setattr(webhook, field, value)
    if renew:
        webhook.secret = new_secret()
    return _saved(webhook) or webhook_out(webhook, with_secret=renew)


@router.delete(
    "/webhooks/{webhook_id}", response={204: None, **errors(403, 404)}, summary="Delete a webhook"
)
def delete_webhook(request, webhook_id: int):
    require(request.auth, "triggers.delete_webhook")
    trigger_for(request.auth, Webhook, webhook_id, "triggers.delete_webhook").delete()
    return Status(204, None)
