"""Which hosts a webhook may reach. A webhook URL is a value from a person, like a
provider's `base_url` (runs/providers/policy.py): without a limit, a subscription could
make the worker POST to an internal address. Checked when a subscription is saved and
again just before each request."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings


def webhook_host_problem(url: str) -> str | None:
    """Why a webhook URL is refused, or None when its host is allowed."""
    try:
        parts = urlsplit(url or "")
        host = (parts.hostname or "").lower()
    except ValueError:
        return "This is not a valid URL."
    if parts.scheme not in ("http", "https") or not host:
        return "A webhook URL starts with https:// (or http://)."
    if parts.username or parts.password:
        return "Put no user name or password in the URL; the signature proves the sender."
    allowed = [h.lower() for h in settings.LOOP_WEBHOOK_HOSTS]
    if host not in allowed:
        listed = ", ".join(allowed) if allowed else "none yet"
        return (
            f"Host {host!r} is not an allowed webhook host (allowed: {listed}); an "
            "administrator can change the list with the LOOP_WEBHOOK_HOSTS setting."
        )
    return None
