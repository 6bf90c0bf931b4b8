"""The live channel: run events and streamed output published on Redis pub/sub.

Publishing is best effort: the database is the record, this only makes open pages update
sooner. A page that missed a message catches up from the event log.

Streamed output is also appended to a short-lived Redis buffer per iteration, in the same
MULTI as its publication, and each chunk carries its offset: a page that opens (or
reconnects) while an agent is writing gets the buffer first and then every later chunk, so
it can show every byte in order even though the database copy is flushed only every
half second.
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
# A buffer outlives its last chunk by this long (each chunk refreshes it), so Redis holds
# about ten minutes of output, not every iteration's. After a longer silence the row's
# flushed copy (every 0.5 s while output arrives) is what a newly opened page starts from.
OUTPUT_BUFFER_SECONDS = 600


def output_target(iteration_id: int) -> str:
    """Names a live output: an iteration's ("it-5") or a plain node run's ("node-7", passed
    here as a negative id)."""
    return f"it-{iteration_id}" if iteration_id > 0 else f"node-{-iteration_id}"


def output_key(run_id: int, target: str) -> str:
    return f"{PREFIX}:out:{run_id}:{target}"


def output_targets_key(run_id: int) -> str:
    return f"{PREFIX}:outs:{run_id}"


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


def publish_output(run_id: int, iteration_id: int, chunk: str, offset: int = 0) -> None:
    """`offset`: how many characters of this output were published before `chunk`."""
    client = _client()
    if client is None or not chunk:
        return
    target = output_target(iteration_id)
    message = {"type": "output", "run": run_id, "target": target, "offset": offset}
    try:
        # One round trip; MULTI so a reader of the buffer sees a chunk there exactly when
        # its publication is already on its way to subscribers.
        pipe = client.pipeline(transaction=True)
        pipe.append(output_key(run_id, target), chunk)
        pipe.expire(output_key(run_id, target), OUTPUT_BUFFER_SECONDS)
        pipe.sadd(output_targets_key(run_id), target)
        pipe.expire(output_targets_key(run_id), OUTPUT_BUFFER_SECONDS)
        pipe.publish(channel(run_id), json.dumps({**message, "chunk": chunk}))
        pipe.execute()
    except (redis.RedisError, OSError) as exc:  # the row's flushed copy is the record
        log.debug("live output publish failed: %s", exc)


class Waiter:
    """A blocking subscription to one run's channel, for a process that waits on the run
    (a script at a gate): `wait(seconds)` returns when a message arrives or the time is
    up. The database stays the record; without Redis, `wait` just sleeps."""

    def __init__(self, run_id: int):
        self.pubsub = None
        if settings.LIVE_REDIS_URL:
            try:
                client = redis.Redis.from_url(settings.LIVE_REDIS_URL, socket_timeout=None)
                self.pubsub = client.pubsub(ignore_subscribe_messages=True)
                self.pubsub.subscribe(channel(run_id))
            except (redis.RedisError, OSError) as exc:
                log.debug("live wait falls back to sleeping: %s", exc)
                self.pubsub = None

    def wait(self, seconds: float) -> None:
        import time

        if self.pubsub is None:
            time.sleep(min(seconds, 0.5))
            return
        try:
            self.pubsub.get_message(timeout=seconds)
        except (redis.RedisError, OSError):
            self.pubsub = None
            time.sleep(min(seconds, 0.5))

    def close(self) -> None:
        if self.pubsub is not None:
            try:
                self.pubsub.close()
            except (redis.RedisError, OSError):
                pass
