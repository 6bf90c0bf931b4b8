"""API tokens: a secret shown once, stored only as its SHA-256 digest, with a scope that
narrows what its user's role allows and an optional expiry."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.functional import cached_property

from console.roles import ROLES, VIEW

# A recognisable prefix lets secret scanners and people tell a Loop Console token apart.
TOKEN_PREFIX = "lc_"


# What a token created by a person (the command, the admin) lives for unless told otherwise.
DEFAULT_LIFETIME = timedelta(days=90)

# What a read-scoped token may use: the viewer role's permissions (console.roles).
VIEW_PERMISSIONS = frozenset(f"{app}.{codename}" for app, codename in VIEW)
OPERATE_PERMISSIONS = VIEW_PERMISSIONS | {"runs.operate_run"}


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class TokenRefused(Exception):
    """A known token that may not be used any more; the message says why."""


class ApiTokenQuerySet(models.QuerySet):
    def active(self):
        return self.filter(revoked_at__isnull=True, user__is_active=True).exclude(
            expires_at__lte=timezone.now()
        )


class ApiToken(models.Model):
    """A bearer token acting as its user, with exactly that user's permissions."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True, help_text="What the token is for.")
    prefix = models.CharField(max_length=8, editable=False, help_text="Start of the secret.")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Scope(models.TextChoices):
        READ = "read", "read-only: look at runs, gates and recipes"
        OPERATE = "operate", "operate: also start, cancel and resume runs, decide at gates"
        EDIT = "edit", "edit: everything the user's role allows, changing recipes included"
        METRICS = "metrics", "metrics: read /metrics only (for a Prometheus scraper)"

    scope = models.CharField(
        max_length=10,
        choices=Scope.choices,
        default=Scope.EDIT,
        help_text="Narrows what the user's role allows; a token never does more than its user.",
    )
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="After this the token answers 401. Empty: never."
    )

    projects = models.ManyToManyField(
        "console.Project",
        blank=True,
        related_name="api_tokens",
        help_text="Only these projects. Empty: every project its user may see.",
    )

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "API token"

    def __str__(self):
        return f"{self.prefix}… ({self.name or 'unnamed'}, {self.user})"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    @cached_property
    def project_ids(self) -> frozenset[int]:
        return frozenset(self.projects.values_list("pk", flat=True)) if self.pk else frozenset()

    @property
    def limited_to_projects(self) -> bool:
        return bool(self.project_ids)

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def state(self) -> str:
        if self.is_revoked:
            return f"revoked {self.revoked_at:%Y-%m-%d %H:%M}"
        if self.is_expired:
            return f"expired {self.expires_at:%Y-%m-%d %H:%M}"
        if self.expires_at:
            return f"expires {self.expires_at:%Y-%m-%d %H:%M}"
        return "never expires"

    def allows(self, perm: str) -> bool:
        """Whether the scope lets the token use ``perm`` (its user must hold it too)."""
        if self.scope == self.Scope.METRICS:
            return False  # /metrics checks the scope itself; nothing of the API is allowed
        if self.scope == self.Scope.READ:
            return perm in VIEW_PERMISSIONS
        if self.scope == self.Scope.OPERATE:
            return perm in OPERATE_PERMISSIONS
        return True

    @classmethod
    def issue(
        cls, user, name: str = "", scope: str = Scope.EDIT, expires_at=None
    ) -> tuple[ApiToken, str]:
        """Create a token; the returned secret is the only copy that will ever exist."""
        if scope not in cls.Scope.values:
            raise ValueError(f"scope must be one of {', '.join(cls.Scope.values)}")
        token = cls(user=user, name=name, scope=scope, expires_at=expires_at)
        secret = token.set_new_secret()
        token.save()
        return token, secret

    def set_new_secret(self) -> str:
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        self.prefix = secret[:8]
        self.key_hash = digest(secret)
        return secret

    @classmethod
    def authenticate(cls, secret: str):
        """The token's user, or None for an unknown, revoked, expired or inactive one."""
        try:
            token = cls.for_secret(secret)
        except TokenRefused:
            return None
        return None if token is None else token.user

    @classmethod
    def for_secret(cls, secret: str) -> ApiToken | None:
        """The active token with this secret (None when unknown, revoked or its user is
        inactive); an expired one raises TokenRefused saying so, since only someone
        holding the secret can learn that."""
        if not secret or len(secret) > 200:
            return None
        token = (
            cls.objects.filter(revoked_at__isnull=True, user__is_active=True)
            .select_related("user")
            .filter(key_hash=digest(secret))
            .first()
        )
        if token is None:
            return None
        if token.is_expired:
            raise TokenRefused(
                f"This API token expired on {token.expires_at:%Y-%m-%d %H:%M} UTC;"
                " create a new one."
            )
        now = timezone.now()
        # Recording every use would write on each request; once a minute is enough to audit.
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            cls.objects.filter(pk=token.pk).update(last_used_at=now)
        return token

    def revoke(self) -> bool:
        if self.revoked_at is not None:
            return False
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])
        return True


# --- projects: who may do what where (console/projects.py has the rule) --------------------

DEFAULT_PROJECT = "default"
ROLE_CHOICES = [(name, name) for name in ROLES]


class Project(models.Model):
    """A group's recipes, runs, schedules, webhooks, providers and subscriptions, with its
    own members' roles (`Membership`); a global role (a group) holds in every project."""

    name = models.CharField(max_length=100)
    slug = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self):
        return self.name

    @classmethod
    def default(cls) -> Project:
        """The project everything belongs to unless told otherwise (made by migration)."""
        project, _ = cls.objects.get_or_create(
            slug=DEFAULT_PROJECT, defaults={"name": "Default project"}
        )
        return project


def default_project_id() -> int:
    return Project.default().pk


class Membership(models.Model):
    """A role in one project."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=40, choices=ROLE_CHOICES)

    class Meta:
        ordering = ["project", "user"]
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="one_role_per_project")
        ]

    def __str__(self):
        return f"{self.user} is {self.role} in {self.project}"


class OidcRoleMapping(models.Model):
    """A value of the identity provider's group (or role) claim, and what it gives at each
    sign-in: a role in one project, or (no project) a global role; "administrator" makes a
    superuser."""

    ADMINISTRATOR = "administrator"

    claim_value = models.CharField(max_length=200, help_text="A group or role the claim carries.")
    role = models.CharField(max_length=40, choices=[*ROLE_CHOICES, (ADMINISTRATOR, ADMINISTRATOR)])
    project = models.ForeignKey(
        Project,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="oidc_mappings",
        help_text="Empty: the role in every project (a global role).",
    )

    class Meta:
        ordering = ["claim_value", "id"]
        verbose_name = "OpenID Connect role mapping"

    def __str__(self):
        where = f"in {self.project}" if self.project_id else "everywhere"
        return f"{self.claim_value} → {self.role} {where}"


class AuditEvent(models.Model):
    """Who did what that an administrator answers for: sign-ins, roles, tokens, decisions,
    recipe edits. Written where it happens, never edited."""

    class Kind(models.TextChoices):
        SIGN_IN = "sign_in"
        SIGN_OUT = "sign_out"
        SIGN_IN_REFUSED = "sign_in_refused"
        ROLE_CHANGED = "role_changed"
        MEMBERSHIP_CHANGED = "membership_changed"
        TOKEN_CREATED = "token_created"
        TOKEN_REVOKED = "token_revoked"
        DECISION = "decision"
        RECIPE_EDITED = "recipe_edited"

    at = models.DateTimeField(default=timezone.now, db_index=True)
    kind = models.CharField(max_length=30, choices=Kind.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True)
    via = models.CharField(max_length=30, blank=True)
    project = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events"
    )
    subject = models.CharField(max_length=300, blank=True)
    data = models.JSONField(default=dict, blank=True)
    address = models.GenericIPAddressField(null=True, blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self):
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor_name} {self.kind} {self.subject}"

    @classmethod
    def record(
        cls,
        kind,
        *,
        actor=None,
        actor_name="",
        via="",
        project=None,
        subject="",
        address=None,
        **data,
    ):
        name = actor_name or (actor.get_username() if actor is not None else "")
        return cls.objects.create(
            kind=kind,
            actor=actor if actor is not None and actor.pk else None,
            actor_name=name,
            via=via,
            project=project,
            subject=subject[:300],
            data=data,
            address=address,
        )
