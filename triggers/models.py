"""Loops that start themselves: a recipe's schedules (sent by Celery beat's database
schedule, django-celery-beat) and its inbound webhooks, with the record of each firing and
each delivery. Runs are started through `runs.services.start_run` like every other start;
the actor is the schedule or the webhook (`runs.actor.Actor.schedule` / `.webhook`)."""

from __future__ import annotations

import secrets
import zoneinfo

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

# The Celery tasks of this app, sent by these names (beat sends FIRE_TASK).
FIRE_TASK = "triggers.fire_schedule"
START_QUEUED_TASK = "triggers.start_queued"


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def new_key() -> str:
    return secrets.token_urlsafe(16)


class StartsRuns(models.Model):
    """What a schedule and a webhook share: the recipe whose runs it starts, and who set
    it up (whose rights a schedule starts with)."""

    recipe = models.ForeignKey(
        "recipes.Recipe", on_delete=models.CASCADE, related_name="%(class)ss"
    )
    name = models.CharField(max_length=100, help_text="What it is for, as pages name it.")
    enabled = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True
        ordering = ["recipe__slug", "name", "id"]

    def __str__(self):
        return f"{self.recipe.slug}: {self.name}"


class Schedule(StartsRuns):
    """Runs of one recipe started on a cron expression or every N seconds."""

    class Concurrency(models.TextChoices):
        SKIP = "skip", "skip the firing while a run of this schedule is going"
        QUEUE = "queue", "queue one run to start when the running one ends"
        CANCEL_PREVIOUS = "cancel_previous", "cancel the running one and start anew"

    cron = models.CharField(
        max_length=100,
        blank=True,
        help_text="Five cron fields: minute hour day-of-month month day-of-week "
        "(e.g. '0 9 * * 1-5'). Or leave empty and give an interval.",
    )
    every_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="An interval instead of a cron expression."
    )
    timezone = models.CharField(
        max_length=64, default="UTC", help_text="The time zone the cron expression is read in."
    )
    message = models.TextField(blank=True, help_text="The message each run starts with.")
    inputs = models.JSONField(default=dict, blank=True, help_text="The runs' inputs.")
    budget = models.JSONField(
        default=dict, blank=True, help_text="Limits replacing the recipe's, one by one."
    )
    repository = models.CharField(
        max_length=500,
        blank=True,
        help_text="For recipes that work in a repository: one the console allows.",
    )
    concurrency = models.CharField(
        max_length=20, choices=Concurrency.choices, default=Concurrency.SKIP
    )
    # The beat entry that sends FIRE_TASK (kept in step by triggers.schedules.sync_beat).
    periodic_task = models.OneToOneField(
        "django_celery_beat.PeriodicTask",
        null=True,
        blank=True,
        editable=False,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    # When the schedule last fired (a compare-and-set: a firing sent twice starts once).
    last_fired_at = models.DateTimeField(null=True, blank=True, editable=False)

    @property
    def when(self) -> str:
        if self.cron:
            return f"cron '{self.cron}' ({self.timezone})"
        return f"every {self.every_seconds} s" if self.every_seconds else "never"

    def clean(self):
        from triggers.schedules import cron_problem

        self.take_the_recipes_clock()
        errors = {}
        if bool(self.cron.strip()) == bool(self.every_seconds):
            errors["cron"] = (
                "Give a cron expression or an interval in seconds (one of them), or leave "
                "both empty for a recipe whose trigger: block declares its schedule."
            )
        elif self.cron and (problem := cron_problem(self.cron)):
            errors["cron"] = problem
        if self.every_seconds is not None and self.every_seconds < 1:
            errors["every_seconds"] = "At least one second."
        try:
            zoneinfo.ZoneInfo(self.timezone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            errors["timezone"] = f"Unknown time zone '{self.timezone}' (e.g. Europe/Paris, UTC)."
        if not isinstance(self.inputs, dict):
            errors["inputs"] = "A mapping of input names to values."
        if errors:
            raise ValidationError(errors)

    def take_the_recipes_clock(self) -> None:
        """A schedule given neither a cron expression nor an interval takes the recipe's
        own, when its `trigger:` block declares one (a step machine's `kind: schedule`)."""
        if self.cron.strip() or self.every_seconds or not self.recipe_id:
            return
        from triggers.webhooks import declared_trigger, recipe_spec

        declared = declared_trigger(self.recipe, recipe_spec(self.recipe))
        if declared.get("kind") != "schedule":
            return
        self.cron = declared.get("cron") or ""
        self.every_seconds = declared.get("every") or None
        if declared.get("timezone"):
            self.timezone = declared["timezone"]


class ScheduleFiring(models.Model):
    """One firing of a schedule and what came of it."""

    class Outcome(models.TextChoices):
        STARTED = "started"
        SKIPPED = "skipped"
        QUEUED = "queued"  # waits for the schedule's running run to end
        FAILED = "failed"  # the run could not start (the reason is in `note`)

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="firings")
    at = models.DateTimeField()
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    note = models.TextField(blank=True)
    run = models.ForeignKey(
        "runs.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-at", "-id"]
        constraints = [
            # At most one firing waits per schedule (the queue policy queues one run).
            models.UniqueConstraint(
                fields=["schedule"],
                condition=models.Q(outcome="queued"),
                name="one_queued_firing_per_schedule",
            )
        ]

    def __str__(self):
        return f"{self.schedule}: {self.outcome} at {self.at:%Y-%m-%d %H:%M:%S}"


class Webhook(StartsRuns):
    """A URL that starts runs of one recipe when a signed delivery arrives."""

    class Signature(models.TextChoices):
        GITHUB = "github", "GitHub (X-Hub-Signature-256: sha256=HMAC of the body)"
        GENERIC = (
            "generic",
            ("Loop Console (X-Loop-Signature: sha256=HMAC of '<X-Loop-Timestamp>.<body>')"),
        )

    # The URL's last part: /hooks/<key>. Not a secret (the signature is), but unguessable.
    key = models.CharField(max_length=40, unique=True, default=new_key, editable=False)
    secret = models.CharField(
        max_length=200,
        default=new_secret,
        help_text="The key deliveries are signed with; give the same to the sender.",
    )
    signature = models.CharField(max_length=10, choices=Signature.choices, default=Signature.GITHUB)
    event_header = models.CharField(
        max_length=100,
        default="X-GitHub-Event",
        help_text="The header naming the event (matched against the events below).",
    )
    delivery_header = models.CharField(
        max_length=100,
        default="X-GitHub-Delivery",
        help_text="The header with the delivery's id: a delivery seen before starts nothing.",
    )
    events = models.JSONField(
        default=list,
        blank=True,
        help_text='Only these events (e.g. ["pull_request"]). Empty: the recipe\'s trigger, '
        "else every event.",
    )
    filters = models.JSONField(
        default=dict,
        blank=True,
        help_text='Fields the body must have: {"/action": ["opened", "synchronize"]} '
        "(JSON pointers to allowed values). Empty: the recipe's trigger.",
    )
    inputs = models.JSONField(
        default=dict,
        blank=True,
        help_text='The run\'s inputs from the body: {"branch": "/pull_request/head/ref"} '
        "(JSON pointers). Empty: the recipe's trigger.",
    )
    message = models.CharField(
        max_length=500,
        blank=True,
        help_text="The run's message: a JSON pointer into the body, or plain text.",
    )
    repository = models.CharField(
        max_length=500,
        blank=True,
        help_text="For recipes that work in a repository: one the console allows.",
    )
    per_minute = models.PositiveIntegerField(
        default=30, help_text="Deliveries accepted a minute; more are answered 429."
    )

    @property
    def path(self) -> str:
        return f"/hooks/{self.key}"


class WebhookDelivery(models.Model):
    """One request a webhook answered (refused ones too, their bodies not kept)."""

    class Outcome(models.TextChoices):
        STARTED = "started"
        DUPLICATE = "duplicate"  # its delivery id was seen: nothing started
        IGNORED = "ignored"  # filtered out: an event or a field the webhook does not take
        REFUSED = "refused"  # a bad signature, an old or oversize body, bad inputs, …

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    delivery_id = models.CharField(max_length=200, blank=True)
    event = models.CharField(max_length=100, blank=True)
    received_at = models.DateTimeField(auto_now_add=True)
    status = models.PositiveSmallIntegerField(help_text="The HTTP status answered.")
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    note = models.TextField(blank=True)
    run = models.ForeignKey(
        "runs.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-received_at", "-id"]
        constraints = [
            # A delivery id starts at most one run: the second insert fails.
            models.UniqueConstraint(
                fields=["webhook", "delivery_id"],
                condition=models.Q(outcome="started"),
                name="one_started_delivery_per_id",
            )
        ]

    def __str__(self):
        return f"{self.webhook}: {self.outcome} ({self.status})"
