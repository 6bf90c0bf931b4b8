"""Server-sent events for open pages, from async views reading Redis pub/sub.

Under ASGI (uvicorn) an open stream is a coroutine waiting on a socket, not a thread, so a
hundred open run pages cost the server almost nothing. The stream carries no page state:
it tells htmx *which* fragments changed (`run-changed`, `gate-changed`,
`iterations-changed`, `inbox-changed`) and htmx re-fetches them; streamed agent output
goes out as `output` events (JSON: target, offset, text) that the page's script places
into the running iteration as text.
Each message carries the run's event seq as its id, so a page that reconnects (or that
was rendered before its stream opened) catches up from `Last-Event-ID` / `?after=`.

Crumbs (run events a loop kind streams for outside consumers, such as a driven loop's
`loop:start`) go out as events of their own name whose data is the crumb's fields, in
seq order; a stream that opens or reconnects after them, or sees a gap in the seqs,
reads the missing ones from the log, so none is lost.
"""

from __future__ import annotations

import asyncio
import json
import re
import time

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.db import connection
from django.http import Http404, HttpResponseForbidden, StreamingHttpResponse
from django.views.decorators.http import require_GET

from runs import live, live_hub
from runs.models import Run

HEARTBEAT_SECONDS = 15
# Messages arriving this close together go out as one batch, so a burst of events (a run
# finishing writes several) makes the page refresh each fragment once.
COALESCE_SECONDS = 0.08
INBOX_COALESCE_SECONDS = 0.5
# Streams end after a while and the browser reconnects (with Last-Event-ID): no
# connection lives forever, and a stale one cannot pile up.
MAX_STREAM_SECONDS = 600
# Without Redis (a broker that is not Redis) the stream watches the run's row instead.
POLL_SECONDS = 1.0
WSGI_RETRY_MS = 3000


# The browser ends a field at CR, LF or CRLF: each of them must start a new `data:` line,
# or text an agent wrote could add its own `id:`, `event:` or `retry:` field.
LINE_BREAK = re.compile(r"\r\n|\r|\n")


def sse(event: str, data: str = "", event_id: int | None = None) -> str:
    """One server-sent event. Only the `data:` lines carry content; the event name and id
    are ours, and a line break in them could never come from content."""
    lines = [f"event: {LINE_BREAK.sub('', event)}"]
    if event_id is not None:
        lines.append(f"id: {int(event_id)}")
    lines += [f"data: {line}" for line in LINE_BREAK.split(data)]
    return "\n".join(lines) + "\n\n"


CRUMB_PREFIXES = ("loop:",)


def is_crumb(kind: str) -> bool:
    return kind.startswith(CRUMB_PREFIXES)


def run_change_events(kinds: set[str]) -> list[str]:
    """Which fragments a batch of run events invalidates."""
    names = ["run-changed"]
    # An output that passed the cap redraws its card: the live view stopped, a link to the
    # whole output appears.
    if "output_truncated" in kinds or any(
        k.startswith(("iteration_", "run_", "loop_", *CRUMB_PREFIXES)) for k in kinds
    ):
        names.append("iterations-changed")
    if any(is_crumb(k) for k in kinds) or "run_catch_up" in kinds:
        names.append("loops-changed")
    if kinds & {"approval_requested", "gate_decided", "gate_reminded"} or any(
        k.startswith("run_") for k in kinds
    ):
        names.append("gate-changed")
    return names


def _after(request) -> int:
    raw = request.headers.get("Last-Event-ID") or request.GET.get("after") or "0"
    try:
        return max(0, int(raw))
    except ValueError:
        return 0


def _stream_response(body) -> StreamingHttpResponse:
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # a proxy in front must not buffer the stream
    return response


async def _readable(request) -> bool:
    user = await request.auser()
    return user.is_authenticated and await user.ahas_perm("runs.view_run")


def _release_connection() -> None:
    """Give the database connection back: the request's thread (and its connection) lives
    as long as the stream, and a hundred idle streams must not hold a hundred connections.
    Inside a transaction (a test's) the connection is left alone."""
    if not connection.in_atomic_block:
        connection.close()


def _read_last_seq(run_id: int) -> int | None:
    try:
        return Run.objects.filter(pk=run_id).values_list("last_seq", flat=True).first()
    finally:
        _release_connection()


_last_seq = sync_to_async(_read_last_seq)


def _let_the_request_thread_go() -> None:
    """Django runs each ASGI request in a context of its own, whose thread-sensitive sync
    calls (middleware, the view's reads) get a one-thread executor that lives as long as
    the request. A stream is a request that lasts: a thousand open pages held a thousand
    idle threads (most of the ~100 KB each page cost). Once the stream starts, that
    thread is let go after each of the stream's reads (`_stream_read`)."""
    from asgiref.sync import SyncToAsync

    context = SyncToAsync.thread_sensitive_context.get(None)
    if context is None:
        return
    executor = SyncToAsync.context_to_thread_executor.pop(context, None)
    if executor is not None:
        executor.shutdown(wait=False)


def _served_by_asgi(request) -> bool:
    """Under WSGI (runserver, a threaded test server) an open stream would hold a thread:
    there the stream answers what changed since Last-Event-ID and ends, and the browser's
    EventSource asks again after `retry` — polling, one short request every few seconds."""
    return isinstance(request, ASGIRequest)


@require_GET
async def run_stream(request, run_id: int):
    if not await _readable(request):
        return HttpResponseForbidden()
    seq = await _last_seq(run_id)
    if seq is None:
        raise Http404("No such run.")
    after = _after(request)
    if not _served_by_asgi(request):
        return _stream_response(iter([await sync_to_async(_catch_up_once)(seq, after, run_id)]))
    return _stream_response(_run_events(run_id, after))


def _catch_up_once(seq: int, after: int, run_id: int) -> str:
    text = f"retry: {WSGI_RETRY_MS}\n\n"
    if seq > after:
        text += "".join(crumb_sse(c) for c in _crumbs(run_id, after, seq))
        text += "".join(sse(name, "", seq) for name in run_change_events({"run_catch_up"}))
    return text


CRUMBS_PER_READ = 1000


def _crumbs(run_id: int, after: int, upto: int) -> list[dict]:
    """The run's crumbs with after < seq <= upto, from the log, in order."""
    from django.db.models import Q

    from runs.models import RunEvent

    starts = Q()
    for prefix in CRUMB_PREFIXES:
        starts |= Q(kind__startswith=prefix)
    found: list[dict] = []
    try:
        while True:
            page = list(
                RunEvent.objects.filter(starts, run_id=run_id, seq__gt=after, seq__lte=upto)
                .order_by("seq")
                .values_list("seq", "kind", "data")[:CRUMBS_PER_READ]
            )
            found += [{"seq": seq, "kind": kind, "data": data} for seq, kind, data in page]
            if len(page) < CRUMBS_PER_READ:
                return found
            after = page[-1][0]
    finally:
        _release_connection()


async def _stream_read(read, *args):
    """A database read from inside an open stream: thread-sensitive like every read of the
    request (so it shares the request's connection and sees what it sees), and the thread
    it gets is let go again at once, so an open stream holds none."""
    try:
        return await sync_to_async(read)(*args)
    finally:
        _let_the_request_thread_go()


def crumb_sse(crumb: dict) -> str:
    return sse(crumb["kind"], json.dumps(crumb.get("data") or {}), crumb["seq"])


async def _run_events(run_id: int, after: int):
    # The first batch comes once subscribed: from then on nothing published is missed.
    prefix = "retry: 1000\n\n"
    async for batch in _messages(live.channel(run_id), COALESCE_SECONDS, run_id=run_id):
        if batch is None:
            yield ": keep-alive\n\n"
            continue
        kinds: set[str] = set()
        crumbs: list[str] = []
        for message in sorted(_events_first(batch), key=lambda m: m.get("seq", 0)):
            seq = message.get("seq", 0)
            if seq <= after:
                continue
            if message.get("type") == "catch-up" or seq != after + 1:
                # Opened late, or a seq skipped (published after a later one): the log
                # has every crumb up to here.
                crumbs += [crumb_sse(c) for c in await _stream_read(_crumbs, run_id, after, seq)]
                kinds.add("run_catch_up" if message.get("type") == "catch-up" else "")
            elif is_crumb(message.get("kind", "")):
                crumbs.append(crumb_sse(message))
            after = seq
            kinds.add(message.get("kind", "") if message.get("type") == "event" else "run_catch_up")
        kinds.discard("")
        parts = [*crumbs, _rendered_output(batch)]
        if kinds:
            parts += [sse(name, "", after) for name in run_change_events(kinds)]
        if any(parts) or prefix:
            yield prefix + "".join(parts)
            prefix = ""


def _events_first(batch: list[dict]) -> list[dict]:
    return [m for m in batch if m.get("type") in ("event", "catch-up")]


def _rendered_output(batch: list[dict]) -> str:
    """The batch's output events, formatted once for all the pages that share it."""
    rendered = getattr(batch, "rendered", None)
    if rendered is not None and "output" in rendered:
        return rendered["output"]
    outputs = [m for m in batch if m.get("type") == "output"]
    text = "".join(sse("output", json.dumps(o)) for o in merge_output(outputs))
    if rendered is not None:
        rendered["output"] = text
    return text


def merge_output(messages: list[dict]) -> list[dict]:
    """Chunks of one batch as `{"target", "offset", "text"}`, adjoining chunks of a target
    joined. The page places each at its offset (as text, never as markup), so chunks it
    already has are skipped and none is lost to a card that was not drawn yet."""
    merged: list[dict] = []
    ends: dict[str, dict] = {}
    for message in messages:
        target, offset, text = message.get("target"), message.get("offset"), message.get("chunk")
        if not isinstance(target, str) or not isinstance(offset, int) or not text:
            continue
        last = ends.get(target)
        if last is not None and last["offset"] + len(last["text"]) == offset:
            last["text"] += text
        else:
            ends[target] = {"target": target, "offset": offset, "text": text}
            merged.append(ends[target])
    return merged


@require_GET
async def inbox_stream(request):
    if not await _readable(request):
        return HttpResponseForbidden()
    await sync_to_async(_release_connection)()
    if not _served_by_asgi(request):
        return _stream_response(iter([f"retry: {WSGI_RETRY_MS}\n\n"]))
    return _stream_response(_inbox_events())


async def _inbox_events():
    async for batch in _messages(live.INBOX_CHANNEL, INBOX_COALESCE_SECONDS):
        if batch is None:
            yield ": keep-alive\n\n"
        elif not batch:
            yield "retry: 2000\n\n"  # subscribed
        else:
            yield sse("inbox-changed")


async def _messages(channel: str, coalesce: float, run_id: int | None = None):
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
            seq = await _stream_read(_read_last_seq, run_id) or 0
            yield [{"type": "catch-up", "seq": seq}, *await live_hub.output_snapshot(run_id)]
        else:
            _let_the_request_thread_go()
            yield []
        while time.monotonic() < deadline:
            batches = await listener.next_batches(HEARTBEAT_SECONDS)
            if batches is None:
                return  # cut off: the browser reconnects and catches up
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
            seq = await _last_seq(run_id) or 0
            if seq != seen:
                seen = seq
                yield [{"type": "catch-up", "seq": seq}]
                idle = 0.0
        await asyncio.sleep(POLL_SECONDS)
        idle += POLL_SECONDS
        if idle >= HEARTBEAT_SECONDS:
            idle = 0.0
            yield None
