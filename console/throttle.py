"""Sign-in throttling: too many failed passwords for one account, or from one address, and
further attempts are refused for a while with a message saying so.

It lives in an authentication backend, so the console's login page and the admin's are
both covered, and a refused attempt never reaches the password check (nor counts again).
Counters are kept in the "throttle" cache: Redis when the console has one, so every web
process shares them (and `manage.py unlock_login` lifts a lock there); in the web
process's memory on the embedded default, where a restart lifts every lock.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core.cache import caches
from django.core.exceptions import ValidationError
from django.dispatch import receiver

log = logging.getLogger(__name__)


def _cache():
    return caches["throttle"]


def _account_key(username: str) -> str:
    return "login:user:" + hashlib.sha256(username.strip().lower().encode()).hexdigest()[:32]


def _address_key(address: str) -> str:
    return f"login:addr:{address}"


def _keys(request, username: str | None) -> list[tuple[str, int]]:
    """The counters an attempt touches, each with the failures it tolerates."""
    keys = []
    if username:
        keys.append((_account_key(username), settings.LOOP_LOGIN_FAILURES_PER_ACCOUNT))
    address = client_address(request) if request is not None else ""
    if address:
        keys.append((_address_key(address), settings.LOOP_LOGIN_FAILURES_PER_ADDRESS))
    return keys


# Headers a proxy (or a client pretending to be one) adds to name the original client.
FORWARDING_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP")


def client_address(request) -> str:
    """The address failed sign-ins are counted against. Behind a proxy (BEHIND_PROXY) the
    client's, as the web server took it from the proxy's header. Otherwise the connection's
    peer: `manage.py serve` starts uvicorn without proxy headers, so REMOTE_ADDR is the
    peer; but a server started by hand with uvicorn's default believes X-Forwarded-For from
    a local peer, so a request that carries a forwarding header (no browser sends one
    unasked) is counted under one shared name, and naming a new address on each attempt
    gains nothing."""
    if not settings.BEHIND_PROXY and any(h in request.META for h in FORWARDING_HEADERS):
        return "forwarded"
    return request.META.get("REMOTE_ADDR") or ""


def seconds_locked(request, username: str | None) -> int:
    """How long this attempt must wait (0: it may go ahead)."""
    try:
        cache = _cache()
        wait = 0
        for key, allowed in _keys(request, username):
            if (cache.get(key) or 0) >= allowed:
                until = cache.get(key + ":until") or time.time()
                wait = max(wait, math.ceil(until - time.time()), 1)
        return wait
    except Exception:  # an unreachable cache must not stop every sign-in
        log.warning("login throttle unavailable; attempt allowed", exc_info=True)
        return 0


def record_failure(request, username: str | None) -> None:
    window = settings.LOOP_LOGIN_LOCKOUT_SECONDS
    try:
        cache = _cache()
        for key, _ in _keys(request, username):
            # The window starts at the first failure and does not slide with later ones.
            if cache.add(key, 0, timeout=window):
                cache.set(key + ":until", time.time() + window, timeout=window)
            try:
                cache.incr(key)
            except ValueError:  # expired between add and incr
                cache.set(key, 1, timeout=window)
    except Exception:
        log.warning("login throttle unavailable; failure not counted", exc_info=True)


def forget_failures(request, username: str | None) -> None:
    """A successful sign-in clears its account's count (not its address's)."""
    if not username:
        return
    account_key = _account_key(username)
    try:
        _cache().delete_many([account_key, account_key + ":until"])
    except Exception:
        log.warning("login throttle unavailable", exc_info=True)


def kept_in_process_memory() -> bool:
    """Whether the counters live in the web process's own memory (no REDIS_URL: the
    embedded default), where no other process, a `manage.py` command, can reach them."""
    from django.core.cache.backends.locmem import LocMemCache

    return isinstance(_cache(), LocMemCache)


def lift(username: str = "", address: str = "") -> dict[str, int]:
    """An administrator lifting a lock (`manage.py unlock_login`): forget the failed
    sign-ins counted against an account (the name as typed at the login page) and an
    address; per one named, how many were counted."""
    keys = {}
    if username:
        keys[f"account '{username}'"] = _account_key(username)
    if address:
        keys[f"address {address}"] = _address_key(address)
    cache = _cache()
    counted = {what: cache.get(key) or 0 for what, key in keys.items()}
    cache.delete_many([k for key in keys.values() for k in (key, key + ":until")])
    return counted


def spend(key: str, limit: int, window: int) -> int:
    """Count one use of ``key``; the seconds to wait when ``limit`` uses within ``window``
    seconds are already spent (0: go ahead). Fails open if the cache is unreachable."""
    try:
        cache = _cache()
        if cache.add(key, 0, timeout=window):
            cache.set(key + ":until", time.time() + window, timeout=window)
        if (cache.get(key) or 0) >= limit:
            until = cache.get(key + ":until") or time.time()
            return max(1, math.ceil(until - time.time()))
        try:
            cache.incr(key)
        except ValueError:
            cache.set(key, 1, timeout=window)
        return 0
    except Exception:
        log.warning("throttle unavailable; use allowed", exc_info=True)
        return 0


def locked_message(seconds: int) -> str:
    minutes = max(1, math.ceil(seconds / 60))
    when = "a minute" if minutes == 1 else f"{minutes} minutes"
    return f"Too many failed sign-in attempts. Please wait {when} and try again."


class ThrottledModelBackend(ModelBackend):
    """Django's username/password check, refused while the account or address is locked."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if username is None:
            username = kwargs.get(self._username_field())
        wait = seconds_locked(request, username)
        if wait:
            # A ValidationError reaches the login form (console and admin) as its message.
            raise ValidationError(locked_message(wait), code="throttled")
        return super().authenticate(request, username=username, password=password, **kwargs)

    @staticmethod
    def _username_field() -> str:
        from django.contrib.auth import get_user_model

        return get_user_model().USERNAME_FIELD


@receiver(user_login_failed)
def _count_failure(sender, credentials, request=None, **kwargs):
    record_failure(request, credentials.get("username"))


@receiver(user_logged_in)
def _clear_failures(sender, request, user, **kwargs):
    forget_failures(request, user.get_username())
