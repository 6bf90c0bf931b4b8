"""Each worker says it is alive: a thread in the worker's main process writes the time into
one Redis hash (`<prefix>:workers`, worker name → Unix time) every
LOOP_WORKER_HEARTBEAT_SECONDS. /metrics reads it; a worker that stopped writing is dead or
stuck. Independent of Celery's own heartbeat events, which need `-E` and a monitor."""

from __future__ import annotations

import logging
import threading
import time

import redis
from django.conf import settings

from runs import live

log = logging.getLogger(__name__)
KEY = f"{live.PREFIX}:workers"
# Names not heard from for a day are dropped from the hash (a worker renamed or retired).
FORGET_SECONDS = 86400
_stop = threading.Event()


def _client():
    if not settings.LIVE_REDIS_URL:
        return None
    return redis.Redis.from_url(settings.LIVE_REDIS_URL, socket_timeout=2)


def beat(name: str, client=None) -> None:
    client = client or _client()
    if client is not None:
        client.hset(KEY, name, f"{time.time():.3f}")


def start(name: str) -> None:
    """Beat now, then every interval until `stop` (a daemon thread: it dies with the worker)."""

    def loop():
        client = _client()
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
