"""Which environment variables and hosts a provider configuration may point at.

A recipe author (an editor) writes inline `providers:`; without these limits one could name
`api_key_env: DATABASE_URL` and a `base_url` on an internal address, and the worker would
send the console's own secret there as a bearer token. Checked when a recipe is validated,
in the admin form, and again when a request is about to go out.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from django.conf import settings

# The console's own secrets: no configuration can hand them to a provider.
ALWAYS_REFUSED_ENV = frozenset({"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SECRET_KEY"})
# Each vendor's key goes only to its own kind of provider: an `openai` provider pointed at
# an allowed host must not be able to send the Anthropic key there.
PAIRED_KEY_ENV = {"OPENAI_API_KEY": "openai", "ANTHROPIC_API_KEY": "anthropic"}
DEFAULT_KEY_ENV = tuple(PAIRED_KEY_ENV)
KEY_KINDS = ("openai", "anthropic")  # the provider kinds that send an api_key_env


def admin_key_entries(entries: list[str] | None = None) -> list[tuple[str | None, str]]:
    """LOOP_PROVIDER_ENV as (kind or None, NAME): `NAME` may be named by a provider of any
    kind, `KIND:NAME` only by one of that kind (`openai:ANTHROPIC_API_KEY`)."""
    parsed = []
    for entry in getattr(settings, "LOOP_PROVIDER_ENV", []) if entries is None else entries:
        kind, _, name = entry.rpartition(":")
        parsed.append((kind or None, name))
    return parsed


def allowed_key_env(kind: str | None = None) -> list[str]:
    """The names a provider of `kind` may name (every kind's names when None)."""
    names = [name for name, paired in PAIRED_KEY_ENV.items() if kind is None or paired == kind]
    names += [name for of, name in admin_key_entries() if kind is None or of is None or of == kind]
    return [n for n in dict.fromkeys(names) if n not in ALWAYS_REFUSED_ENV]


def key_env_problem(name: str | None, kind: str | None = None) -> str | None:
    """Why a provider of `kind` may not name `api_key_env: name`, or None when it may.
    Without a kind only the list is checked, not the pairing."""
    if not name:
        return None
    if name in ALWAYS_REFUSED_ENV:
        return f"{name} is one of the console's own secrets and is never sent to a provider"
    if name in allowed_key_env(kind):
        return None
    own = [n for n, paired in PAIRED_KEY_ENV.items() if paired == kind]
    if name in PAIRED_KEY_ENV:
        instead = f"write api_key_env: {own[0]}" if own else "remove api_key_env"
        return (
            f"{name} is the key of {PAIRED_KEY_ENV[name]} providers and is not sent to "
            f"{_a(kind)} provider: {instead} (an administrator can allow it with "
            f"LOOP_PROVIDER_ENV={kind}:{name})"
        )
    allowed = allowed_key_env(kind)
    return (
        f"{name} is not an allowed API key variable (allowed"
        + (f" for {_a(kind)} provider" if kind else "")
        + f": {', '.join(allowed) or 'none'}); an administrator can add names with the "
        "LOOP_PROVIDER_ENV setting"
    )


def _a(kind: str | None) -> str:
    return f"an {kind}" if kind and kind[0] in "aeiou" else f"a {kind}"


def local_hosts() -> list[str]:
    """Hosts an inline provider may reach over plain http and on any port (a local model
    server, the test suite's fake APIs): LOOP_PROVIDER_HTTP_HOSTS."""
    return [h.lower() for h in getattr(settings, "LOOP_PROVIDER_HTTP_HOSTS", [])]


def host_problem(url: str | None) -> str | None:
    """Why an inline provider's `base_url` is refused, or None when it may be used: its
    host must be allowed, and it must be `https://` without a port unless the host is on
    the local list."""
    if not url:
        return None
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError:
        return f"{url!r} is not a valid URL"
    if parts.scheme not in ("http", "https") or not host:
        return f"{url!r} is not an http(s) URL"
    local = local_hosts()
    allowed = list(dict.fromkeys([*(h.lower() for h in settings.LOOP_PROVIDER_HOSTS), *local]))
    if host not in allowed:
        return (
            f"host {host!r} is not an allowed provider host (allowed: {', '.join(allowed)}); "
            "an administrator can change the list with the LOOP_PROVIDER_HOSTS setting"
        )
    if host in local:
        return None
    fixed = _https_without_port(parts)
    if parts.scheme != "https":
        return (
            f"{url!r} uses plain http, which would send the API key unencrypted: write "
            f"{fixed!r} (an administrator can list a local model server's host in "
            "LOOP_PROVIDER_HTTP_HOSTS)"
        )
    if port is not None:
        return (
            f"{url!r} names a port: write {fixed!r} (an administrator can list a local model "
            "server's host in LOOP_PROVIDER_HTTP_HOSTS to use another port)"
        )
    return None


def _https_without_port(parts) -> str:
    netloc = parts.hostname or ""
    if ":" in netloc:  # an IPv6 address
        netloc = f"[{netloc}]"
    return urlunsplit(("https", netloc, parts.path, parts.query, ""))


# How much of its account a provider's calls may use (runs/providers/limits.py enforces it).
LIMIT_FIELDS = ("max_concurrent", "requests_per_minute", "tokens_per_minute")


def limit_problems(config: dict) -> dict[str, str]:
    """What is wrong with the limits a provider's configuration gives: each is a whole
    number above 0, or absent (checked when a recipe loads and in the admin form)."""
    found = {}
    for name in LIMIT_FIELDS:
        value = config.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            found[name] = f"{name} must be a whole number above 0, not {value!r}"
    return found
