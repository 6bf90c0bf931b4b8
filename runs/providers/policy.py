"""Which environment variables and hosts a provider configuration may point at.

A recipe author (an editor) writes inline `providers:`; without these limits one could name
`api_key_env: DATABASE_URL` and a `base_url` on an internal address, and the worker would
send the console's own secret there as a bearer token. Checked when a recipe is validated,
in the admin form, and again when a request is about to go out.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings

# The console's own secrets: no configuration can hand them to a provider.
ALWAYS_REFUSED_ENV = frozenset({"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SECRET_KEY"})
DEFAULT_KEY_ENV = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")


def allowed_key_env() -> list[str]:
    names = [*DEFAULT_KEY_ENV, *getattr(settings, "LOOP_PROVIDER_ENV", [])]
    return [n for n in dict.fromkeys(names) if n not in ALWAYS_REFUSED_ENV]


def key_env_problem(name: str | None) -> str | None:
    """Why `api_key_env: name` is refused, or None when it may be used."""
    if not name:
        return None
    allowed = allowed_key_env()
    if name in ALWAYS_REFUSED_ENV:
        return f"{name} is one of the console's own secrets and is never sent to a provider"
    if name not in allowed:
        return (
            f"{name} is not an allowed API key variable (allowed: {', '.join(allowed)}); "
            "an administrator can add names with the LOOP_PROVIDER_ENV setting"
        )
    return None


def host_problem(url: str | None) -> str | None:
    """Why an inline provider's `base_url` is refused, or None when its host is allowed."""
    if not url:
        return None
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
    except ValueError:
        return f"{url!r} is not a valid URL"
    if parts.scheme not in ("http", "https") or not host:
        return f"{url!r} is not an http(s) URL"
    allowed = [h.lower() for h in settings.LOOP_PROVIDER_HOSTS]
    if host not in allowed:
        return (
            f"host {host!r} is not an allowed provider host (allowed: {', '.join(allowed)}); "
            "an administrator can change the list with the LOOP_PROVIDER_HOSTS setting"
        )
    return None
