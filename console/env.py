"""Read one environment variable strictly: a malformed value stops start-up with an
ImproperlyConfigured error that names the variable (console.settings and its parts)."""

import os

from django.core.exceptions import ImproperlyConfigured


def env_bool(name: str, default: bool) -> bool:
    raw = os.getenv(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false, 1/0, yes/no), got {raw!r}")


def env_int(name: str, default: int) -> int:
    raw = os.getenv(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.getenv(name)
    if raw is None or raw.strip() == "":
        return default
    items = [item.strip() for item in raw.split(",")]
    if any(not item for item in items):
        raise ImproperlyConfigured(f"{name} must be a comma-separated list without empty items")
    return items


def env_url(name: str, schemes: tuple[str, ...]) -> str | None:
    """A URL that may carry a password: from NAME, or from the file NAME_FILE names."""
    from console.secrets import secret

    raw = secret(name)
    if raw is None or raw.strip() == "":
        return None
    scheme = raw.split("://", 1)[0] if "://" in raw else ""
    if scheme not in schemes:
        raise ImproperlyConfigured(
            f"{name} must be a URL starting with one of {', '.join(s + '://' for s in schemes)}"
        )
    return raw.strip()
