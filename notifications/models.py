"""Who hears about what: subscriptions (per recipe or per person) and the record of every
delivery. A delivery row is written in the same transaction as the event it announces, so
nothing is announced that did not happen, and nothing that happened goes unannounced."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q
from django.utils import timezone

from notifications.policy import webhook_host_problem

# The Celery task that delivers one notification, sent by this name through runs.dispatch.
SEND_TASK = "notifications.send_notification"

# What a subscription can hear about (the names payloads and e-mail subjects carry).
EVENTS = {
    "gate_waiting": "a gate waits for a decision",
    "gate_reminder": "a gate's deadline passed without a decision",
    "run_completed": "a run completed",
    "run_failed": "a run failed",
}


def new_secret() -> str:
    return secrets.token_urlsafe(32)


class Subscription(models.Model):
    """A webhook or an e-mail address that hears about some events, for one recipe's runs
    or all of them; a person's subscription can be narrowed to the runs they started."""

    class Channel(models.TextChoices):
        WEBHOOK = "webhook", "webhook (signed POST)"
        EMAIL = "email", "e-mail"

    name = models.CharField(max_length=100, help_text="What this subscription is for.")
    channel = models.CharField(max_length=10, choices=Channel.choices, default=Channel.WEBHOOK)
    recipe = models.ForeignKey(
        "recipes.Recipe",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="subscriptions",
        help_text="Only this recipe's runs. Empty: every recipe.",
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="subscriptions",
        help_text="The person this is for: e-mail goes to their address unless one is given "
        "below. They must be able to read runs (the viewer role).",
    )
    only_own_runs = models.BooleanField(
        default=False, help_text="Only runs the person above started."
    )
    url = models.URLField(
        max_length=500, blank=True, help_text="Webhook: where to POST (an allowed host)."
    )
    secret = models.CharField(
        max_length=100,
        default=new_secret,
        help_text="Webhook: the key the signature is made with; give it to the receiver.",
    )
    email = models.EmailField(blank=True, help_text="E-mail: the address (else the person's).")
    on_gate_waiting = models.BooleanField("a gate waits", default=True)
    on_gate_reminder = models.BooleanField("a gate's deadline passed", default=True)
    on_run_completed = models.BooleanField("a run completed", default=False)
    on_run_failed = models.BooleanField("a run failed", default=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self):
        return self.name

    def clean(self):
        errors = {}
        if self.channel == self.Channel.WEBHOOK:
            if not self.url:
                errors["url"] = "A webhook needs a URL."
            elif problem := webhook_host_problem(self.url):
                errors["url"] = problem
        elif not (self.email or (self.user_id and self.user.email)):
            errors["email"] = "Give an address, or choose a person who has one."
        if self.only_own_runs and not self.user_id:
            errors["only_own_runs"] = "Choose the person whose runs these are."
        if errors:
            raise ValidationError(errors)

    @property
    def address(self) -> str:
        return self.email or (self.user.email if self.user_id else "")

    @property
    def target(self) -> str:
        return self.url if self.channel == self.Channel.WEBHOOK else self.address

    @classmethod
    def listening(cls, event: str, run):
        """The enabled subscriptions that hear about `event` on `run` (one query)."""
        subs = cls.objects.filter(enabled=True, **{f"on_{event}": True})
        subs = subs.filter(Q(recipe__isnull=True) | Q(recipe_id=run.recipe_id))
        subs = subs.filter(Q(only_own_runs=False) | Q(user_id=run.started_by_id))
        return subs.select_related("user")


class DeliveryQuerySet(models.QuerySet):
    def claim(self, pk: int, now, lease_seconds: int) -> Delivery | None:
        """Take a delivery for one attempt (conditional UPDATE: one worker wins; a sending
        row whose worker vanished is taken again after its lease)."""
        due = Q(status=Delivery.Status.PENDING) | Q(
            status=Delivery.Status.SENDING, next_attempt_at__lt=now
        )
        claimed = (
            self.filter(due, pk=pk)
            .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
            .update(
                status=Delivery.Status.SENDING,
                attempts=F("attempts") + 1,
                last_attempt_at=now,
                next_attempt_at=now + timezone.timedelta(seconds=lease_seconds),
            )
        )
        if not claimed:
            return None
        return self.select_related("subscription__user").get(pk=pk)

    def lost(self, stale_before):
        """Deliveries due for a while that nobody sent (their message was lost)."""
        return self.filter(
            status__in=[Delivery.Status.PENDING, Delivery.Status.SENDING],
            next_attempt_at__lt=stale_before,
        )


class Delivery(models.Model):
    """One notification to one subscription, and how sending it went."""

    class Status(models.TextChoices):
        PENDING = "pending"
        SENDING = "sending"
        DELIVERED = "delivered"
        FAILED = "failed"

    subscription = models.ForeignKey(
        Subscription, on_delete=models.CASCADE, related_name="deliveries"
    )
    event = models.CharField(max_length=30)
    run = models.ForeignKey("runs.Run", null=True, on_delete=models.SET_NULL, related_name="+")
    gate = models.ForeignKey("runs.Gate", null=True, on_delete=models.SET_NULL, related_name="+")
    payload = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    response_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.CharField(max_length=300, blank=True, help_text="Never a response body.")
    created_at = models.DateTimeField(default=timezone.now)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    objects = DeliveryQuerySet.as_manager()

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "deliveries"
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="delivery_due")]

    def __str__(self):
        return f"{self.event} → {self.subscription} [{self.status}]"
