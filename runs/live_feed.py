"""What every live stream of a run reads: the run's events in seq order, none missed, and
the output its agents stream, in batches as they arrive.

The run page's stream (runs.live_views) and the AG-UI stream (runs.ag_ui_views) are two
renderings of this one feed. It subscribes to the run's channel through the process's hub
(runs.live_hub), then reads what happened before it subscribed from the log; after that a
published event whose seq does not follow the last one (published out of order, or lost)
makes it read the missing ones from the log, so a stream never skips an event it was
asked for. Without Redis it watches the run's row instead.

Reads from an open stream go through `stream_read`, which gives the request's thread back
after each read: a stream is a request that lasts, and must not hold a thread or a
database connection while it waits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection
from django.db.models import Q

from runs import live, live_hub
from runs.models import Run

HEARTBEAT_SECONDS = 15
# Streams end after a while and the client reconnects (with Last-Event-ID): no connection
# lives forever, and a stale one cannot pile up.
MAX_STREAM_SECONDS = 600
# Without Redis (a broker that is not Redis) the stream watches the run's row instead.
POLL_SECONDS = 1.0
EVENTS_PER_READ = 1000
CRUMB_PREFIXES = ("loop:",)


def is_crumb(kind: str) -> bool:
    return kind.startswith(CRUMB_PREFIXES)


@dataclass
class FeedBatch:
    """What one batch of the channel brought, in order: `events` are run events (`seq`,
    `kind`, `step`, `data`) with seqs after the last batch's, each once; `opened` says the
    stream (re)opened with this batch (what changed before it is not known event by
    event); `outputs` are the streamed output messages (`target`, `offset`, `chunk`);
    `batch` is the hub's batch, shared by every stream of the run in this process."""

    events: list[dict]
    opened: bool
    outputs: list[dict]
    batch: list = field(default_factory=list)
    seq: int = 0


def release_connection() -> None:
    """Give the database connection back: the request's thread (and its connection) lives
    as long as the stream, and a hundred idle streams must not hold a hundred connections.
    Inside a transaction (a test's) the connection is left alone."""
    if not connection.in_atomic_block:
        connection.close()


def read_last_seq(run_id: int, user=None) -> int | None:
    """The run's last seq; None when there is no such run, or (given `user`) none of a
    project where they may read runs (console.projects): a stream of it is a 404."""
    runs = Run.objects.all() if user is None else Run.objects.visible_to(user)
    try:
        return runs.filter(pk=run_id).values_list("last_seq", flat=True).first()
    finally:
        release_connection()


last_seq = sync_to_async(read_last_seq)


def let_the_request_thread_go() -> None:
    """Django runs each ASGI request in a context of its own, whose thread-sensitive sync
    calls (middleware, the view's reads) get a one-thread executor that lives as long as
    the request. A stream is a request that lasts: a thousand open pages held a thousand
    idle threads (most of the ~100 KB each page cost). Once the stream starts, that
    thread is let go after each of the stream's reads (`stream_read`)."""
    from asgiref.sync import SyncToAsync

    context = SyncToAsync.thread_sensitive_context.get(None)
    if context is None:
        return
    executor = SyncToAsync.context_to_thread_executor.pop(context, None)
    if executor is not None:
        executor.shutdown(wait=False)


async def stream_read(read, *args):
    """A database read from inside an open stream: thread-sensitive like every read of the
    request (so it shares the request's connection and sees what it sees), and the thread
    it gets is let go again at once, so an open stream holds none."""
    try:
        return await sync_to_async(read)(*args)
    finally:
        let_the_request_thread_go()


def kinds_starting(*prefixes: str) -> Q:
    where = Q()
    for prefix in prefixes:
        where |= Q(kind__startswith=prefix)
    return where


def logged_events(run_id: int, after: int, upto: int, where: Q | None = None) -> list[dict]:
    """The run's events with after < seq <= upto, from the log, in order (those `where`
    selects, when given)."""
    from runs.models import RunEvent

    kinds = where if where is not None else Q()
    found: list[dict] = []
    try:
        while True:
            page = list(
                RunEvent.objects.filter(kinds, run_id=run_id, seq__gt=after, seq__lte=upto)
                .order_by("seq")
                .values_list("seq", "kind", "step", "data")[:EVENTS_PER_READ]
            )
            found += [{"seq": s, "kind": k, "step": st, "data": d} for s, k, st, d in page]
            if len(page) < EVENTS_PER_READ:
                return found
            after = page[-1][0]
    finally:
        release_connection()


def logged_crumbs(run_id: int, after: int, upto: int) -> list[dict]:
    return logged_events(run_id, after, upto, kinds_starting(*CRUMB_PREFIXES))


async def follow(run_id: int, after: int, coalesce: float, read_log: Callable = logged_events):
    """The run's feed after seq `after`: a FeedBatch per batch, or None when it is time for
    a heartbeat. `read_log(run_id, after, upto)` reads what the channel did not bring (all
    events, or only what the stream shows of them)."""
    async for batch in messages(live.channel(run_id), coalesce, run_id=run_id):
        if batch is None:
            yield None
            continue
        events: list[dict] = []
        opened = False
        for message in sorted(
            (m for m in batch if m.get("type") in ("event", "catch-up")),
            key=lambda m: m.get("seq", 0),
        ):
            seq = message.get("seq", 0)
            if seq <= after:
                continue
            if message.get("type") == "catch-up":
                # Opened (or reopened): the log has everything up to here.
                opened = True
                events += await stream_read(read_log, run_id, after, seq)
            else:
                if seq != after + 1:
                    # A seq skipped (published after a later one, or lost): read the gap.
                    events += await stream_read(read_log, run_id, after, seq - 1)
                events.append(message)
            after = seq
        outputs = [m for m in batch if m.get("type") == "output"]
        yield FeedBatch(events=events, opened=opened, outputs=outputs, batch=batch, seq=after)


async def messages(channel: str, coalesce: float, run_id: int | None = None):
    """Batches of decoded pub/sub messages, or None when it is time for a heartbeat.

    The first batch comes right after subscribing: for a run, a catch-up marker with the
    run's current seq and what its agents have written so far (both read *after*
    subscribing, so nothing in between is lost); for the inbox, an empty batch.
    """
    deadline = time.monotonic() + MAX_STREAM_SECONDS
    if not settings.LIVE_REDIS_URL:  # polling reads the database all along: no release
        async for batch in _poll(run_id, deadline):
            yield batch
        return
    async with live_hub.hub().listen(channel, coalesce) as listener:
        if run_id is not None:
            seq = await stream_read(read_last_seq, run_id) or 0
            yield [{"type": "catch-up", "seq": seq}, *await live_hub.output_snapshot(run_id)]
        else:
            let_the_request_thread_go()
            yield []
        while time.monotonic() < deadline:
            batches = await listener.next_batches(HEARTBEAT_SECONDS)
            if batches is None:
                return  # cut off: the client reconnects and catches up
            if not batches:
                yield None
            for batch in batches:
                yield batch


async def _poll(run_id: int | None, deadline: float):
    seen = None
    idle = 0.0
    if run_id is None:
        yield []
    while time.monotonic() < deadline:
        if run_id is not None:
            seq = await last_seq(run_id) or 0
            if seq != seen:
                seen = seq
                yield [{"type": "catch-up", "seq": seq}]
                idle = 0.0
        await asyncio.sleep(POLL_SECONDS)
        idle += POLL_SECONDS
        if idle >= HEARTBEAT_SECONDS:
            idle = 0.0
            yield None
