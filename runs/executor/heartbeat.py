"""Each worker says it is alive: a thread in the worker's main process writes the time into
one Redis hash (`<prefix>:workers`, worker name → Unix time) every
LOOP_WORKER_HEARTBEAT_SECONDS. /metrics reads it; a worker that stopped writing is dead or
stuck. Independent of Celery's own heartbeat events, which need `-E` and a monitor.

Beside it, each worker says once whether its children run sandboxed
(`<prefix>:worker-sandbox`, worker name → JSON of runs.sandbox.SandboxStatus): the staff
banner, /healthz and /metrics tell people when they do not."""

from __future__ import annotations

import json
import logging
import threading
import time

import redis
from django.conf import settings

from runs import live

log = logging.getLogger(__name__)
KEY = f"{live.PREFIX}:workers"
SANDBOX_KEY = f"{live.PREFIX}:worker-sandbox"
# Names not heard from for a day are dropped from the hash (a worker renamed or retired).
FORGET_SECONDS = 86400
# A worker whose heartbeat is older than this many intervals counts as gone.
ALIVE_INTERVALS = 3
_stop = threading.Event()


def _client():
    if not settings.LIVE_REDIS_URL:
        return None
    return redis.Redis.from_url(settings.LIVE_REDIS_URL, socket_timeout=2)


def beat(name: str, client=None) -> None:
    client = client or _client()
    if client is not None:
        client.hset(KEY, name, f"{time.time():.3f}")


def start(name: str, sandbox=None) -> None:
    """Beat now, then every interval until `stop` (a daemon thread: it dies with the worker);
    `sandbox` (a runs.sandbox.SandboxStatus) is written once, beside."""

    def loop():
        client = _client()
        if sandbox is not None and client is not None:
            try:
                state = {"active": sandbox.active, "mode": sandbox.mode, "detail": sandbox.detail}
                client.hset(SANDBOX_KEY, name, json.dumps(state))
            except (redis.RedisError, OSError) as exc:
                log.warning("worker sandbox state not written: %s", exc)
        while True:
            try:
                beat(name, client)
            except (redis.RedisError, OSError) as exc:
                log.warning("worker heartbeat not written: %s", exc)
            if _stop.wait(settings.LOOP_WORKER_HEARTBEAT_SECONDS):
                return

    _stop.clear()
    threading.Thread(target=loop, daemon=True, name="loop-worker-heartbeat").start()


def stop(name: str) -> None:
    _stop.set()
    try:
        client = _client()
        if client is not None:
            client.hdel(KEY, name)
            client.hdel(SANDBOX_KEY, name)
    except (redis.RedisError, OSError):
        pass


def read(client=None) -> dict[str, float]:
    """Worker name → last heartbeat (Unix time); forgets names silent for a day."""
    client = client or _client()
    if client is None:
        return {}
    now = time.time()
    beats = {}
    for name, value in client.hgetall(KEY).items():
        name, at = name.decode(), float(value)
        if now - at > FORGET_SECONDS:
            client.hdel(KEY, name)
            continue
        beats[name] = at
    return beats


def alive(beats: dict[str, float]) -> list[str]:
    """The workers heard from within ALIVE_INTERVALS heartbeats."""
    horizon = time.time() - ALIVE_INTERVALS * settings.LOOP_WORKER_HEARTBEAT_SECONDS
    return sorted(name for name, at in beats.items() if at >= horizon)


def sandbox_states(client=None) -> dict[str, dict]:
    """Worker name → {"active", "mode", "detail"}, for the workers alive now."""
    client = client or _client()
    if client is None:
        return {}
    living = alive(read(client))
    states = {}
    for name, value in client.hgetall(SANDBOX_KEY).items():
        name = name.decode()
        if name not in living:
            continue
        try:
            states[name] = json.loads(value)
        except ValueError:
            continue
    return states
