"""Provider limits shared by every worker on every host, in Redis: at most `max_concurrent`
calls at once, `requests_per_minute` and `tokens_per_minute`, per provider account.

The one seam to Redis for them. Each operation is one Lua script, atomic in Redis (no lock
of our own): slots are a sorted set of holders scored by their lease's end, so a killed
worker's slot comes back when its lease runs out; requests and tokens are sliding windows
of a minute. Callers that cannot have a slot yet queue first come, first served across
runs (a busy run's new calls wait behind the others'), and are told how many wait ahead.

An account is its kind, its API root and its key (a hash of the key's value, never the
key): two provider configurations with one key share its limits. A provider without a key
is limited by its name.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import random
import threading
import time
from dataclasses import dataclass

import redis
from django.conf import settings

from .policy import LIMIT_FIELDS

log = logging.getLogger(__name__)

PREFIX = "loop:limits:"
NAMES = PREFIX + "names"  # account → the provider name pages and metrics show
MINUTE_MS = 60_000


@dataclass(frozen=True)
class Limits:
    max_concurrent: int = 0
    requests_per_minute: int = 0
    tokens_per_minute: int = 0

    def __bool__(self) -> bool:
        return any((self.max_concurrent, self.requests_per_minute, self.tokens_per_minute))

    @classmethod
    def of(cls, config: dict) -> Limits:
        """From a provider's configuration (an admin row's columns, an inline provider's
        options); a missing, empty or unreadable value is no limit."""
        values = {}
        for name in LIMIT_FIELDS:
            try:
                values[name] = max(int(config.get(name) or 0), 0)
            except (TypeError, ValueError):
                values[name] = 0
        return cls(**values)


def account(name: str, kind: str, config: dict, key_value: str = "") -> str:
    """Whose limits a provider's calls count against (see the module's docstring)."""
    if not key_value:
        return f"name:{name}"
    root = config.get("base_url") or ""
    digest = hashlib.sha256(f"{kind}\0{root}\0{key_value}".encode()).hexdigest()
    return f"key:{digest[:24]}"


class AlreadyHeld(Exception):
    """Another delivery of the same call holds its slot and makes the call: this one has
    nothing to do (a duplicate message, a waiter woken twice)."""


class Busy(Exception):
    """No slot (or no room in a window) yet: wait `wait_seconds` at least; `ahead` callers
    wait before this one."""

    def __init__(self, provider: str, ahead: int, wait_seconds: float):
        super().__init__(f"waiting for provider {provider} ({ahead} ahead)")
        self.provider, self.ahead, self.wait_seconds = provider, ahead, wait_seconds

    @property
    def words(self) -> str:
        return f"waiting for provider {self.provider} ({self.ahead} ahead)"


def _client() -> redis.Redis:
    """This process's client (its pool reconnects after a fork): every call, renewal and
    release would otherwise open a connection of its own."""
    return _client_for(settings.LIVE_REDIS_URL)


@functools.cache
def _client_for(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=5)


def _keys(account_key: str) -> list[str]:
    base = PREFIX + account_key
    return [f"{base}:{part}" for part in ("held", "waiting", "seen", "requests", "tokens")]


# KEYS: held, waiting, seen, requests, tokens, the names. ARGV: now (ms), lease (ms),
# max_concurrent, requests a minute, tokens a minute, the caller, how long it may take to
# ask again (ms), the provider's name and its account (kept for the figures: `figures`).
# `seen` scores each waiter by when it must have asked again: one that did not (its run was
# cancelled, its worker lost) leaves the queue, not blocking those behind it.
# Returns {1} when the caller holds a slot (and its request is counted), {2} when it held
# one already (another delivery of the same call has it), else {0, how many wait ahead of
# it, the least time to wait in ms}.
_TAKE = """
local now, lease = tonumber(ARGV[1]), tonumber(ARGV[2])
local most, rpm, tpm = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local me, grace = ARGV[6], tonumber(ARGV[7])
redis.call('HSET', KEYS[6], ARGV[9], ARGV[8])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)) do
  redis.call('ZREM', KEYS[2], gone)
  redis.call('ZREM', KEYS[3], gone)
end
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now - 60000)
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now - 60000)
if redis.call('ZSCORE', KEYS[1], me) then return {2, 0, 0} end
if not redis.call('ZSCORE', KEYS[2], me) then redis.call('ZADD', KEYS[2], now, me) end
redis.call('ZADD', KEYS[3], now + grace, me)
local ahead = redis.call('ZRANK', KEYS[2], me)
local free, wait = 1000000, 0
if most > 0 then free = math.min(free, most - redis.call('ZCARD', KEYS[1])) end
if rpm > 0 then
  local room = rpm - redis.call('ZCARD', KEYS[4])
  if room <= ahead then
    local oldest = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
    wait = math.max(wait, tonumber(oldest[2]) + 60000 - now)
  end
  free = math.min(free, room)
end
if tpm > 0 then
  local used = 0
  for _, entry in ipairs(redis.call('ZRANGE', KEYS[5], 0, -1)) do
    used = used + tonumber(string.match(entry, '^(%d+):'))
  end
  if used >= tpm then
    local oldest = redis.call('ZRANGE', KEYS[5], 0, 0, 'WITHSCORES')
    wait = math.max(wait, tonumber(oldest[2]) + 60000 - now)
    free = 0
  end
end
if ahead >= free then return {0, ahead, wait} end
redis.call('ZREM', KEYS[2], me)
redis.call('ZREM', KEYS[3], me)
if most > 0 then redis.call('ZADD', KEYS[1], now + lease, me) end
if rpm > 0 then redis.call('ZADD', KEYS[4], now, me .. ':' .. now) end
return {1, 0, 0}
"""

# KEYS: held, waiting, tokens. ARGV: now, the caller, tokens it used, how many to wake.
# Gives the slot back, counts the tokens, and names the first waiters (to wake them now).
_GIVE_BACK = """
redis.call('ZREM', KEYS[1], ARGV[2])
local used = tonumber(ARGV[3])
if used > 0 then redis.call('ZADD', KEYS[3], ARGV[1], used .. ':' .. ARGV[2] .. ':' .. ARGV[1]) end
return redis.call('ZRANGE', KEYS[2], 0, tonumber(ARGV[4]) - 1)
"""

_RENEW = "return redis.call('ZADD', KEYS[1], 'XX', 'CH', ARGV[1], ARGV[2])"


# How late a waiter may ask again (a busy machine delays a task's countdown) before it is
# taken for gone.
GRACE_SECONDS = 15.0


def lease_seconds() -> float:
    return float(settings.LOOP_PROVIDER_SLOT_LEASE_SECONDS)


class Slot:
    """A call's place under its provider's limits, held until `give_back` (renewed every
    third of its lease meanwhile, from a thread of its own, while the call runs)."""

    def __init__(self, provider: str, account_key: str, caller: str, limits: Limits):
        self.provider, self.account_key = provider, account_key
        self.caller, self.limits = caller, limits
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self.released = False

    def keep(self) -> Slot:
        if self.limits.max_concurrent and self._renewer is None:
            self._renewer = threading.Thread(target=self._renew, daemon=True)
            self._renewer.start()
        return self

    def _renew(self) -> None:
        held = _keys(self.account_key)[0]
        every = lease_seconds() / 3
        while not self._stop.wait(every):
            try:
                until = int((time.time() + lease_seconds()) * 1000)
                _client().eval(_RENEW, 1, held, until, self.caller)
            except (redis.RedisError, OSError) as exc:
                log.warning("could not renew a slot of provider %s: %s", self.provider, exc)

    def give_back(self, tokens: int | None = None) -> list[str]:
        """Release the slot and count `tokens`; the callers waiting first, to wake. Once:
        a second call does nothing."""
        if self.released:
            return []
        self.released = True
        self._stop.set()
        held, waiting, _, _, used = _keys(self.account_key)
        wake = max(self.limits.max_concurrent, 1)
        try:
            now = int(time.time() * 1000)
            first = _client().eval(
                _GIVE_BACK, 3, held, waiting, used, now, self.caller, int(tokens or 0), wake
            )
        except (redis.RedisError, OSError) as exc:
            log.warning("could not give back a slot of provider %s: %s", self.provider, exc)
            return []
        return [m.decode() if isinstance(m, bytes) else m for m in first]


def of(provider) -> tuple[Limits, str]:
    """A built provider's limits and account (`registry.build` sets them); none for one
    that declares no limits."""
    inner = getattr(provider, "inner", provider)  # a worktree's RecordingDiffs
    return getattr(inner, "limits", Limits()), getattr(inner, "limit_account", "")


def take(provider, caller: str) -> Slot | None:
    """A slot for `caller` (a unique name: `iteration:<id>`) under `provider`'s limits, or
    None when it has none; Busy when it must wait, AlreadyHeld when another delivery of the
    same call holds it."""
    limits, account_key = of(provider)
    if not limits:
        return None
    name = getattr(provider, "name", "") or account_key
    now = int(time.time() * 1000)
    client = _client()
    got, ahead, wait_ms = client.eval(
        _TAKE,
        6,
        *_keys(account_key),
        NAMES,
        now,
        int(lease_seconds() * 1000),
        limits.max_concurrent,
        limits.requests_per_minute,
        limits.tokens_per_minute,
        caller,
        int(GRACE_SECONDS * 1000),
        name,
        account_key,
    )
    if got == 2:
        raise AlreadyHeld(caller)
    if got:
        return Slot(name, account_key, caller, limits).keep()
    wait = poll_after(int(ahead), int(wait_ms) / 1000)
    # It must ask again by then (plus the grace), or it leaves the queue.
    seen = _keys(account_key)[2]
    client.zadd(seen, {caller: now + int((wait + GRACE_SECONDS) * 1000)}, xx=True)
    raise Busy(name, int(ahead), wait)


def poll_after(ahead: int, at_least: float) -> float:
    """When a waiter asks again: after the window it waits for, else soon (a released slot
    also wakes the first waiters at once), later the further back it stands; with jitter,
    so waiters that queued together do not ask together."""
    base = max(at_least, settings.LOOP_PROVIDER_POLL_SECONDS * (1 + min(ahead, 8) / 4))
    return base * random.uniform(1.0, 1.25)


def backoff(tries: int, retry_after: float | None) -> float:
    """How long to wait after the provider said it is busy (429, 503, 529) for the
    `tries`-th time in a row: its Retry-After, else doubling from a second, with jitter."""
    if retry_after is not None:
        return retry_after * random.uniform(1.0, 1.1)
    return min(2.0 ** max(tries - 1, 0), 60.0) * random.uniform(0.8, 1.2)


def ceiling_seconds() -> float:
    """How long a call may wait for its provider before it fails (a plain script without
    the console waits the default)."""
    try:
        return float(settings.LOOP_PROVIDER_WAIT_CEILING_SECONDS)
    except Exception:  # noqa: BLE001 - settings not configured: a script run alone
        return 1800.0


def gave_up(provider: str, waited: float, words: str) -> str:
    """The error of a call that waited for its provider past the ceiling."""
    return (
        f"gave up waiting for provider {provider} after {int(waited)} s "
        f"(LOOP_PROVIDER_WAIT_CEILING_SECONDS): {words}"
    )


def wait_for(provider, caller: str, keep_alive=None) -> Slot | None:
    """Block until `caller` holds a slot (for a kind that cannot put its call back in the
    queue); `keep_alive()` runs between polls (it may raise Cancelled). Past the ceiling, a
    ProviderError with what it waited for."""
    from .base import ProviderError

    since = time.monotonic()
    while True:
        try:
            return take(provider, caller)
        except Busy as busy:
            waited = time.monotonic() - since
            if waited > ceiling_seconds():
                raise ProviderError(gave_up(busy.provider, waited, busy.words)) from None
            if keep_alive is not None:
                keep_alive()
            pause = min(busy.wait_seconds, settings.LOOP_PROVIDER_POLL_SECONDS * 2)
            count("waited_seconds", busy.provider, pause)
            time.sleep(pause)


# --- figures for /metrics and the admin's panel ---------------------------------------------

COUNTERS = PREFIX + "counters"


def count(what: str, provider: str, amount: float = 1) -> None:
    """Add to a provider's counter (`throttled`: answers of 429/503/529, and
    `waited_seconds`), shared by every worker."""
    try:
        _client().hincrbyfloat(COUNTERS, f"{provider}\0{what}", amount)
    except (redis.RedisError, OSError) as exc:
        log.warning("could not count %s for provider %s: %s", what, provider, exc)


def figures() -> list[dict]:
    """Per provider with limits: calls in flight, callers waiting, and the counters."""
    client = _client()
    names = {k.decode(): v.decode() for k, v in client.hgetall(NAMES).items()}
    counters: dict[str, dict[str, float]] = {}
    for key, value in client.hgetall(COUNTERS).items():
        provider, _, what = key.decode().partition("\0")
        counters.setdefault(provider, {})[what] = float(value)
    now = int(time.time() * 1000)
    found = {}
    for account_key, name in names.items():
        held, waiting, *_ = _keys(account_key)
        row = found.setdefault(name, {"provider": name, "in_flight": 0, "waiting": 0})
        row["in_flight"] += client.zcount(held, now, "+inf")
        row["waiting"] += client.zcard(waiting)
    for name, values in counters.items():
        row = found.setdefault(name, {"provider": name, "in_flight": 0, "waiting": 0})
        row.update(values)
    return sorted(found.values(), key=lambda row: row["provider"])
