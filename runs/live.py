"""The live channel: run events and streamed output published on Redis pub/sub.

Publishing is best effort: the database is the record, this only makes open pages update
sooner. A page that missed a message catches up from the event log.
"""

import json
import logging
import threading

import redis
from django.conf import settings

log = logging.getLogger(__name__)
_local = threading.local()


# Channels carry the queue name, so consoles (or test suites) that share one Redis with
# different databases never see each other's runs.
PREFIX = f"loopconsole:{settings.CELERY_TASK_DEFAULT_QUEUE}"


def channel(run_id: int) -> str:
    return f"{PREFIX}:run:{run_id}"


INBOX_CHANNEL = f"{PREFIX}:inbox"


def _client():
    if not settings.LIVE_REDIS_URL:
        return None
    client = getattr(_local, "client", None)
    if client is None:
        client = redis.Redis.from_url(settings.LIVE_REDIS_URL, socket_timeout=2)
        _local.client = client
    return client


def publish(run_id: int, message: dict) -> None:
    client = _client()
    if client is None:
        return
    try:
        payload = json.dumps(message)
        if message.get("type") == "event":
            # Both channels in one round trip: events are published several times per
            # iteration, and each round trip is time the worker is not running the loop.
            pipe = client.pipeline(transaction=False)
            pipe.publish(channel(run_id), payload)
            pipe.publish(INBOX_CHANNEL, payload)
            pipe.execute()
        else:
            client.publish(channel(run_id), payload)
    except (redis.RedisError, OSError) as exc:  # the log on disk is the record
        log.debug("live publish failed: %s", exc)


def publish_event(run_id: int, event: dict) -> None:
    publish(run_id, {"type": "event", "run": run_id, **event})


def publish_output(run_id: int, iteration_id: int, chunk: str) -> None:
    publish(run_id, {"type": "output", "run": run_id, "iteration": iteration_id, "chunk": chunk})
