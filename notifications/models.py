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
        SLACK = "slack", "Slack (a message with decision buttons)"

    name = models.CharField(max_length=100, help_text="What this subscription is for.")
    channel = models.CharField(max_length=10, choices=Channel.choices, default=Channel.WEBHOOK)
    project = models.ForeignKey(
        "console.Project",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="subscriptions",
        help_text="Only this project's runs. Empty: every project its person may see.",
    )
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
    slack_channel = models.CharField(
        max_length=80,
        blank=True,
        help_text="Slack: the channel's ID (C0123ABCD, at the foot of its details); the app "
        "must be a member of it.",
    )
    # Who made it: a webhook carries decision links only for a person who set it up
    # themselves (notifications.transports.webhook_links).
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        editable=False,
        on_delete=models.SET_NULL,
        related_name="+",
    )
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
        elif self.channel == self.Channel.SLACK:
            if not self.slack_channel:
                errors["slack_channel"] = "A Slack subscription needs a channel."
        elif not (self.email or (self.user_id and self.user.email)):
            errors["email"] = "Give an address, or choose a person who has one."
        if self.only_own_runs and not self.user_id:
            errors["only_own_runs"] = "Choose the person whose runs these are."
        if self.recipe_id and self.project_id and self.recipe.project_id != self.project_id:
            errors["recipe"] = f"This recipe belongs to the project {self.recipe.project}."
        if errors:
            raise ValidationError(errors)

    @property
    def address(self) -> str:
        return self.email or (self.user.email if self.user_id else "")

    @property
    def target(self) -> str:
        if self.channel == self.Channel.SLACK:
            return self.slack_channel
        return self.url if self.channel == self.Channel.WEBHOOK else self.address

    @classmethod
    def listening(cls, event: str, run):
        """The enabled subscriptions that hear about `event` on `run`: of its project or of
        every project, and, a person's, only while that person may see the run there (their
        role in its project, console.projects). One query finds them; each person's right
        is asked once, as every surface asks it (`has_perm` on the run)."""
        subs = cls.objects.filter(enabled=True, **{f"on_{event}": True})
        subs = subs.filter(Q(project__isnull=True) | Q(project_id=run.project_id))
        subs = subs.filter(Q(recipe__isnull=True) | Q(recipe_id=run.recipe_id))
        subs = subs.filter(Q(only_own_runs=False) | Q(user_id=run.started_by_id))
        subs = subs.select_related("user")
        people = {sub.user for sub in subs if sub.user_id is not None}
        refused = [p.pk for p in people if not p.has_perm("runs.view_run", run)]
        # Read once: a query again only when someone may not see the run.
        return subs.exclude(user_id__in=refused) if refused else subs


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
        return self.select_related("subscription__user", "recipient").get(pk=pk)

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

    # A subscription's delivery; or, with none, an escalation to a person the recipe names
    # (`escalate_to`), who subscribed to nothing: `recipient` says who.
    subscription = models.ForeignKey(
        Subscription, null=True, blank=True, on_delete=models.CASCADE, related_name="deliveries"
    )
    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="An escalation's person (a delivery without a subscription).",
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
        return f"{self.event} → {self.subscription or self.recipient} [{self.status}]"


class DecisionLinkQuerySet(models.QuerySet):
    def live(self, now=None):
        """Links that could still decide: not used, not revoked, not expired."""
        return self.filter(
            used_at__isnull=True, revoked_at__isnull=True, expires_at__gt=now or timezone.now()
        )

    def revoke(self, now=None) -> int:
        """Revoke every live link of this queryset (e.g. all of one person's); how many."""
        return self.filter(used_at__isnull=True, revoked_at__isnull=True).update(
            revoked_at=now or timezone.now()
        )


class DecisionLink(models.Model):
    """One signed link that decides one gate one way, for one named person, once. The URL
    carries a signed token naming this row; the row is what makes it single-use and
    revocable (notifications/links.py makes and checks them)."""

    gate = models.ForeignKey("runs.Gate", on_delete=models.CASCADE, related_name="decision_links")
    decision = models.CharField(max_length=64, help_text="The offered decision's id.")
    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="decision_links"
    )
    digest = models.CharField(
        max_length=64, blank=True, help_text="The gate's digest when the link was made."
    )
    delivery = models.ForeignKey(
        Delivery, null=True, blank=True, on_delete=models.SET_NULL, related_name="links"
    )
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = DecisionLinkQuerySet.as_manager()

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["recipient", "used_at"], name="decisionlink_recipient")]

    def __str__(self):
        return f"{self.decision} on gate {self.gate_id} for {self.recipient}"

    def use(self, now=None) -> bool:
        """Spend the link (conditional UPDATE: of two clicks, one wins); False if it was
        used, revoked or expired in between."""
        now = now or timezone.now()
        spent = DecisionLink.objects.live(now).filter(pk=self.pk).update(used_at=now)
        if spent:
            self.used_at = now
        return bool(spent)

    def revoke(self, now=None) -> bool:
        now = now or timezone.now()
        revoked = DecisionLink.objects.filter(pk=self.pk).revoke(now)
        if revoked:
            self.revoked_at = now
        return bool(revoked)


class SlackUserQuerySet(models.QuerySet):
    def console_user(self, slack_user_id: str, team_id: str = ""):
        """The console account linked to this Slack user (a link naming the workspace
        before one for any workspace), or None."""
        link = (
            self.filter(slack_user_id=slack_user_id, team_id__in=[team_id, ""])
            .select_related("user")
            .order_by("-team_id")
            .first()
        )
        return link.user if link else None


class SlackUser(models.Model):
    """An explicit link from a Slack user to a console account: asked before the e-mail of
    the Slack profile, for people whose two addresses differ."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="slack_accounts"
    )
    slack_user_id = models.CharField(
        "Slack member ID", max_length=32, help_text="U0123ABCD: in the person's Slack profile."
    )
    team_id = models.CharField(
        "Slack workspace ID", max_length=32, blank=True, help_text="T0123ABCD. Empty: any."
    )

    objects = SlackUserQuerySet.as_manager()

    class Meta:
        verbose_name = "Slack user"
        constraints = [
            models.UniqueConstraint(
                fields=["slack_user_id", "team_id"], name="one_link_per_slack_user"
            )
        ]

    def __str__(self):
        return f"{self.slack_user_id} → {self.user}"


class SlackMessage(models.Model):
    """A gate's message in a Slack channel, kept so that it can be updated with who
    decided (every message of the gate: a reminder posts another)."""

    gate = models.ForeignKey("runs.Gate", on_delete=models.CASCADE, related_name="slack_messages")
    delivery = models.ForeignKey(
        Delivery, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    channel = models.CharField(max_length=80)
    ts = models.CharField(max_length=32, help_text="Slack's id of the message in its channel.")
    summary = models.TextField(help_text="What the message said, kept for its updates.")
    posted_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["channel", "ts"], name="one_row_per_slack_message")
        ]

    def __str__(self):
        return f"gate {self.gate_id} in {self.channel} at {self.ts}"


# Slack refuses a request older than this (its signature's timestamp), so a key older than
# it can never be replayed and is dropped.
SLACK_REPLAY_SECONDS = 5 * 60


class SlackAction(models.Model):
    """A button press Slack sent, by its workspace, user and `action_ts`: a replay of the
    same signed request finds its key taken and decides nothing."""

    key = models.CharField(max_length=120, unique=True)
    at = models.DateTimeField(default=timezone.now, db_index=True)

    def __str__(self):
        return self.key

    @classmethod
    def first_time(cls, key: str, now=None) -> bool:
        """Record the press; False when it was recorded before (a replay). The unique key
        makes it one winner of two concurrent copies."""
        now = now or timezone.now()
        cls.objects.filter(
            at__lt=now - timezone.timedelta(seconds=2 * SLACK_REPLAY_SECONDS)
        ).delete()
        _, created = cls.objects.get_or_create(key=key, defaults={"at": now})
        return created
