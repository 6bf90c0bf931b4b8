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
reads the missing ones from the log, so none is lost (runs.live_feed, which the AG-UI
stream reads too).

A script reads the stream with an API token (`Authorization: Bearer`, read scope) as
well as a browser with its session.
"""

from __future__ import annotations

import json
import re

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import Http404, HttpResponseForbidden, JsonResponse, StreamingHttpResponse
from django.views.decorators.http import require_GET

from console.auth import NO_TOKEN, NOT_VALID, accepts_api_token, bearer_secret, token_user
from console.models import TokenRefused
from runs import live, live_feed
from runs.live_feed import CRUMB_PREFIXES, is_crumb
from runs.models import Run

# Messages arriving this close together go out as one batch, so a burst of events (a run
# finishing writes several) makes the page refresh each fragment once.
COALESCE_SECONDS = 0.08
INBOX_COALESCE_SECONDS = 0.5
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
    if kinds & {"approval_requested", "gate_decided", "gate_reminded", "gate_escalated"} or any(
        k.startswith("run_") for k in kinds
    ):
        names.append("gate-changed")
    return names


def after_seq(request) -> int:
    raw = request.headers.get("Last-Event-ID") or request.GET.get("after") or "0"
    try:
        return max(0, int(raw))
    except ValueError:
        return 0


def stream_response(body) -> StreamingHttpResponse:
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # a proxy in front must not buffer the stream
    return response


async def stream_reader(request, *, api: bool = False):
    """Who may read a run's stream: an API token (`Authorization: Bearer`, any scope that
    reads runs) or the console's session. Returns None when the request may read, else
    the response that refuses it: 401 for a token that is unknown, revoked or expired,
    403 for a reader without the viewer role (or a token whose scope does not read).
    `api`: refuse as the API does (JSON, and 401 without credentials)."""
    secret = bearer_secret(request.headers)
    if secret is not None:
        try:
            user = await live_feed.stream_read(token_user, secret)
        except TokenRefused as refused:
            return refused_json(401, str(refused))
        if user is None:
            return refused_json(401, NOT_VALID)
        request.user = user
    else:
        user = await request.auser()
    if user.is_authenticated and await reads_runs(user):
        return None
    if secret is not None:
        return refused_json(
            403, "This API token cannot read runs: it needs the 'read' scope or more."
        )
    if not api:
        return HttpResponseForbidden()
    if not user.is_authenticated:
        return refused_json(401, NO_TOKEN)
    return refused_json(403, "Your role does not allow this.")


async def reads_runs(user) -> bool:
    """Whether `user` reads runs in some project (console.projects): asked of `has_perm`,
    which every backend answers, a membership's included."""
    return await sync_to_async(user.has_perm)("runs.view_run")


def refused_json(status: int, detail: str) -> JsonResponse:
    response = JsonResponse({"detail": detail}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = "Bearer"
    return response


def served_by_asgi(request) -> bool:
    """Under WSGI (runserver, a threaded test server) an open stream would hold a thread:
    there the stream answers what changed since Last-Event-ID and ends, and the browser's
    EventSource asks again after `retry` — polling, one short request every few seconds."""
    return isinstance(request, ASGIRequest)


@accepts_api_token
@require_GET
async def run_stream(request, run_id: int):
    if (refused := await stream_reader(request)) is not None:
        return refused
    seq = await live_feed.last_seq(run_id, request.user)  # another project's: as none
    if seq is None:
        raise Http404("No such run.")
    after = after_seq(request)
    if not served_by_asgi(request):
        return stream_response(iter([await sync_to_async(_catch_up_once)(seq, after, run_id)]))
    return stream_response(_run_events(run_id, after))


def _catch_up_once(seq: int, after: int, run_id: int) -> str:
    text = f"retry: {WSGI_RETRY_MS}\n\n"
    if seq > after:
        text += "".join(crumb_sse(c) for c in live_feed.logged_crumbs(run_id, after, seq))
        text += "".join(sse(name, "", seq) for name in run_change_events({"run_catch_up"}))
    return text


def crumb_sse(crumb: dict) -> str:
    return sse(crumb["kind"], json.dumps(crumb.get("data") or {}), crumb["seq"])


async def _run_events(run_id: int, after: int):
    # The first batch comes once subscribed: from then on nothing published is missed.
    prefix = "retry: 1000\n\n"
    feed = live_feed.follow(run_id, after, COALESCE_SECONDS, read_log=live_feed.logged_crumbs)
    async for item in feed:
        if item is None:
            yield ": keep-alive\n\n"
            continue
        kinds = {event["kind"] for event in item.events}
        if item.opened:
            kinds.add("run_catch_up")
        parts = [crumb_sse(e) for e in item.events if is_crumb(e["kind"])]
        parts.append(_rendered_output(item.batch))
        if kinds:
            parts += [sse(name, "", item.seq) for name in run_change_events(kinds)]
        if any(parts) or prefix:
            yield prefix + "".join(parts)
            prefix = ""


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
    user = await request.auser()
    if not (user.is_authenticated and await reads_runs(user)):
        return HttpResponseForbidden()
    await sync_to_async(live_feed.release_connection)()
    if not served_by_asgi(request):
        return stream_response(iter([f"retry: {WSGI_RETRY_MS}\n\n"]))
    return stream_response(_inbox_events(SeenRuns(user)))


async def _inbox_events(seen: SeenRuns):
    async for batch in live_feed.messages(live.INBOX_CHANNEL, INBOX_COALESCE_SECONDS):
        if batch is None:
            yield ": keep-alive\n\n"
        elif not batch:
            yield "retry: 2000\n\n"  # subscribed
        elif await seen.any_of(batch):
            yield sse("inbox-changed")


class SeenRuns:
    """Which runs an inbox stream's reader may see: a change to a run of a project they
    have nothing in refreshes nothing (its timing would tell of it). A run's project is
    set once, so each run is asked about once (one query for a batch's new ones)."""

    REMEMBERED = 10_000

    def __init__(self, user):
        self.user = user
        self.known: dict[int, bool] = {}

    async def any_of(self, batch: list[dict]) -> bool:
        ids = {m.get("run") for m in batch if isinstance(m.get("run"), int)}
        new = ids - self.known.keys()
        if new:
            if len(self.known) > self.REMEMBERED:
                self.known.clear()
            seen = await live_feed.stream_read(_seen_runs, self.user, new)
            self.known.update({pk: pk in seen for pk in new})
        return any(self.known.get(pk) for pk in ids)


def _seen_runs(user, ids: set[int]) -> set[int]:
    try:
        runs = Run.objects.visible_to(user).filter(pk__in=ids)
        return set(runs.values_list("pk", flat=True))
    finally:
        live_feed.release_connection()
