"""One Redis subscriber per server process, fanning live messages out to its open pages.

A page's stream registers a listener for its channel; the hub's single pattern
subscription reads every live message once, decodes it once, and hands it to the
listeners of that channel. A thousand open pages cost a thousand small in-memory queues,
not a thousand Redis connections.

A listener that falls too far behind (a stalled client), or a hub that loses Redis, ends
the listener's stream: the browser reconnects with Last-Event-ID and catches up from the
database, so nothing is lost, only delayed.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import time
import weakref

import redis.asyncio as aioredis
from django.conf import settings

from runs import live

log = logging.getLogger(__name__)

# Messages a page may have waiting before it is cut off and left to catch up on reconnect.
MAX_PENDING = 2000
# With no page open for this long, the hub lets go of its Redis connection.
IDLE_SECONDS = 30.0
RECONNECT_SECONDS = 1.0
SUBSCRIBE_TIMEOUT = 10.0
# How the hub's connection shows in Redis's CLIENT LIST (one per server process).
HUB_CLIENT_NAME = f"{live.PREFIX}:hub".replace(" ", "_")


class Batch(list):
    """Messages of one channel that arrived within its coalescing window, shared by every
    listener of the channel; `rendered` lets the streams format what is the same for all
    pages once instead of once per page."""

    def __init__(self, messages=()):
        super().__init__(messages)
        self.rendered: dict[str, str] = {}


class Listener:
    def __init__(self, channel: str):
        self.channel = channel
        self.batches: collections.deque[Batch] = collections.deque()
        self.wake = asyncio.Event()
        self.lost = False  # the stream must end; the page reconnects and catches up

    def push(self, batch: Batch) -> None:
        if len(self.batches) >= MAX_PENDING:
            self.lose()
            return
        self.batches.append(batch)
        self.wake.set()

    def lose(self) -> None:
        self.lost = True
        self.batches.clear()
        self.wake.set()

    async def next_batches(self, timeout: float) -> list[Batch] | None:
        """The batches waiting; [] when `timeout` passed with none; None once the listener
        is lost."""
        if not self.batches and not self.lost:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self.wake.wait()
        self.wake.clear()
        if self.lost:
            return None
        batches = list(self.batches)
        self.batches.clear()
        return batches


class Hub:
    def __init__(self):
        self.listeners: dict[bytes, set[Listener]] = {}
        self.coalesce: dict[bytes, float] = {}
        self.pending: dict[bytes, Batch] = {}
        self.ready = asyncio.Event()
        self.task: asyncio.Task | None = None
        self.client = aioredis.from_url(settings.LIVE_REDIS_URL)  # commands, not pub/sub

    @contextlib.asynccontextmanager
    async def listen(self, channel: str, coalesce: float = 0.0):
        """A listener for `channel`; on entry the subscription is live, so anything
        published from then on reaches it. Messages arriving within `coalesce` seconds of
        each other reach it as one batch (a burst refreshes each fragment once)."""
        listener = Listener(channel)
        key = channel.encode()
        self.coalesce[key] = coalesce
        self.listeners.setdefault(key, set()).add(listener)
        try:
            if self.task is None or self.task.done():
                self.ready.clear()
                self.task = asyncio.create_task(self._run())
            await asyncio.wait_for(self.ready.wait(), SUBSCRIBE_TIMEOUT)
            yield listener
        finally:
            group = self.listeners.get(key)
            if group is not None:
                group.discard(listener)
                if not group:
                    del self.listeners[key]
                    self.coalesce.pop(key, None)

    def count(self) -> int:
        return sum(len(group) for group in self.listeners.values())

    async def _run(self) -> None:
        idle_since = None
        while True:
            client = aioredis.from_url(settings.LIVE_REDIS_URL, client_name=HUB_CLIENT_NAME)
            pubsub = client.pubsub()
            try:
                await pubsub.psubscribe(f"{live.PREFIX}:*")
                while True:
                    message = await pubsub.get_message(timeout=1.0)
                    if message is None:
                        if self.listeners:
                            idle_since = None
                        elif idle_since is None:
                            idle_since = time.monotonic()
                        elif time.monotonic() - idle_since > IDLE_SECONDS:
                            # No await between the check and this: a page arriving now
                            # starts a new task rather than waiting on this one.
                            self.ready.clear()
                            self.task = None
                            return
                        continue
                    if message["type"] == "psubscribe":
                        self.ready.set()
                    elif message["type"] == "pmessage":
                        self._deliver(message["channel"], message["data"])
            except (aioredis.RedisError, OSError) as exc:
                log.warning("live hub lost Redis: %s", exc)
                self.ready.clear()
                for group in list(self.listeners.values()):
                    for listener in list(group):
                        listener.lose()
                await asyncio.sleep(RECONNECT_SECONDS)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
                    await client.aclose()

    def _deliver(self, channel: bytes, data: bytes) -> None:
        if channel not in self.listeners:
            return  # no page of this process shows that run: not even decoded
        try:
            message = json.loads(data)
        except (TypeError, ValueError):
            return
        batch = self.pending.get(channel)
        if batch is None:
            batch = self.pending[channel] = Batch()
            delay = self.coalesce.get(channel, 0.0)
            asyncio.get_running_loop().call_later(delay, self._flush, channel)
        batch.append(message)

    def _flush(self, channel: bytes) -> None:
        batch = self.pending.pop(channel, None)
        for listener in list(self.listeners.get(channel, ())):
            listener.push(batch)


# One hub per event loop: uvicorn runs one loop per process; tests may run several in turn.
_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Hub] = weakref.WeakKeyDictionary()


def hub() -> Hub:
    loop = asyncio.get_running_loop()
    found = _hubs.get(loop)
    if found is None:
        found = _hubs[loop] = Hub()
    return found


async def output_snapshot(run_id: int) -> list[dict]:
    """What the agents of this run have written so far, as output messages from offset 0
    (only what is still in the short-lived buffers: running or just-finished work)."""
    client = hub().client
    targets = sorted(t.decode() for t in await client.smembers(live.output_targets_key(run_id)))
    if not targets:
        return []
    texts = await client.mget([live.output_key(run_id, t) for t in targets])
    return [
        {"type": "output", "target": t, "offset": 0, "chunk": text.decode("utf-8", "replace")}
        for t, text in zip(targets, texts, strict=True)
        if text
    ]
