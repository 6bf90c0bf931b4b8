"""API tokens: a secret shown once, stored only as its SHA-256 digest."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

# A recognisable prefix lets secret scanners and people tell a Loop Console token apart.
TOKEN_PREFIX = "lc_"


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet):
    def active(self):
        return self.filter(revoked_at__isnull=True, user__is_active=True)


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

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "API token"

    def __str__(self):
        return f"{self.prefix}… ({self.name or 'unnamed'}, {self.user})"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    @classmethod
    def issue(cls, user, name: str = "") -> tuple[ApiToken, str]:
        """Create a token; the returned secret is the only copy that will ever exist."""
        token = cls(user=user, name=name)
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
        """The token's user, or None for an unknown, revoked or inactive one."""
        if not secret or len(secret) > 200:
            return None
        token = cls.objects.active().select_related("user").filter(key_hash=digest(secret)).first()
        if token is None:
            return None
        now = timezone.now()
        # Recording every use would write on each request; once a minute is enough to audit.
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            cls.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user

    def revoke(self) -> bool:
        if self.revoked_at is not None:
            return False
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])
        return True
