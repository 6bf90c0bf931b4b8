"""`GET /api/runs/{id}/ag-ui`: a run as an AG-UI event stream (runs.ag_ui translates).

It reads the same feed as the run page's live stream (runs.live_feed: the events in seq
order, none missed, and the streamed output) and the same credentials (an API token with
the read scope, or the session). `Last-Event-ID` (or `?after=`) is the seq of the last
run event seen: the stream opens a new AG-UI run with the state as of then and goes on
from there. It ends once the run has ended; under WSGI it answers what happened up to
now and ends.

A POST (what AG-UI's HttpAgent sends, with a RunAgentInput body) is answered like a GET:
the stream follows the run; the body is not read, since nothing here starts or steers a
run (see the MCP server, runs.orchestration, for that).
"""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from runs import ag_ui, live_feed, live_hub
from runs.live_feed import CRUMB_PREFIXES, kinds_starting
from runs.live_views import (
    COALESCE_SECONDS,
    after_seq,
    refused_json,
    served_by_asgi,
    stream_reader,
    stream_response,
)


def _state_events(run_id: int, upto: int) -> list[dict]:
    """What the state and the AG-UI run a stream opens at `upto` are folded from."""
    where = kinds_starting("run_", *CRUMB_PREFIXES)
    where |= kinds_starting(*ag_ui.GATE_EVENTS)
    return live_feed.logged_events(run_id, 0, upto, where)


def _texts(run_id: int, events: list[dict]) -> dict:
    """The whole text of each iteration and node these events end, keyed as
    AgUiRun.events expects, with its live target."""
    from runs.models import Iteration, NodeRun

    ends = [e for e in events if e["kind"] in ag_ui.ITERATION_ENDS | ag_ui.STEP_CLOSERS]
    if not ends:
        return {}
    texts: dict = {}
    try:
        iterations = {(e["step"], (e.get("data") or {}).get("iteration")) for e in ends}
        rows = Iteration.objects.filter(
            run_id=run_id,
            node_id__in={step for step, _ in iterations},
            number__in={n for _, n in iterations if n},
        ).values_list("node_id", "number", "pk", "raw_output")
        latest = {(node, number): (pk, text) for node, number, pk, text in sorted(rows, key=_pk)}
        nodes = NodeRun.objects.filter(
            run_id=run_id, node_id__in={e["step"] for e in ends}, iteration_count=0
        ).values_list("node_id", "iteration", "pk", "output")
        node_texts = {(node, n or None): (pk, text) for node, n, pk, text in nodes}
    finally:
        live_feed.release_connection()
    for event in ends:
        number = (event.get("data") or {}).get("iteration")
        key = (event["kind"], event["step"], number)
        if event["kind"] in ag_ui.ITERATION_ENDS and (event["step"], number) in latest:
            pk, text = latest[(event["step"], number)]
            texts[key] = (f"it-{pk}", text)
        elif event["kind"] in ag_ui.STEP_CLOSERS and (event["step"], number) in node_texts:
            pk, text = node_texts[(event["step"], number)]
            if text:
                texts[key] = (f"node-{pk}", text)
    return texts


def _pk(row) -> int:
    return row[2]


def _still_running(run_id: int, outputs: list[dict]) -> list[dict]:
    """The buffers a stream finds on opening, less those of work that has ended (their
    text went out, or goes out, with their end)."""
    from runs.models import Iteration, NodeRun

    ids = {"it": set(), "node": set()}
    for message in outputs:
        kind, _, number = str(message.get("target", "")).partition("-")
        if kind in ids and number.isdigit():
            ids[kind].add(int(number))
    try:
        running = {
            f"it-{pk}"
            for pk in Iteration.objects.filter(
                run_id=run_id, pk__in=ids["it"], status="running"
            ).values_list("pk", flat=True)
        } | {
            f"node-{pk}"
            for pk in NodeRun.objects.filter(
                run_id=run_id, pk__in=ids["node"], status="running"
            ).values_list("pk", flat=True)
        }
    finally:
        live_feed.release_connection()
    return [m for m in outputs if m.get("target") in running]


async def _buffer(run_id: int, message: dict) -> dict:
    """A chunk that came after a gap, replaced by everything its target wrote so far."""
    from runs import live

    text = await live_hub.hub().client.get(live.output_key(run_id, message["target"]))
    if text is None:
        return message
    return {**message, "offset": 0, "chunk": text.decode("utf-8", "replace")}


@csrf_exempt  # reads only; a POST is AG-UI's HttpAgent asking to follow the run
@require_http_methods(["GET", "POST"])
async def run_ag_ui(request, run_id: int):
    if (refused := await stream_reader(request, api=True)) is not None:
        return refused
    seq = await live_feed.last_seq(run_id, request.user)  # another project's: as none
    if seq is None:
        return refused_json(404, f"No run {run_id}.")
    after = min(after_seq(request), seq)
    translator = ag_ui.AgUiRun(run_id)
    prior = await live_feed.stream_read(_state_events, run_id, after)
    opening = "".join(ag_ui.encode(e) for e in translator.open(prior))
    if not served_by_asgi(request):
        return stream_response(iter([await sync_to_async(_once)(translator, opening, after, seq)]))
    return stream_response(_stream(run_id, after, translator, opening))


def _once(translator: ag_ui.AgUiRun, opening: str, after: int, seq: int) -> str:
    events = live_feed.logged_events(translator.run_id, after, seq)
    texts = _texts(translator.run_id, events)
    return opening + "".join(ag_ui.encode(e, i) for e, i in translator.events(events, texts))


async def _stream(run_id: int, after: int, translator: ag_ui.AgUiRun, opening: str):
    yield opening
    if translator.ended:
        return
    async for item in live_feed.follow(run_id, after, COALESCE_SECONDS):
        if item is None:
            yield ": keep-alive\n\n"
            continue
        texts = await live_feed.stream_read(_texts, run_id, item.events)
        frames = [ag_ui.encode(e, i) for e, i in translator.events(item.events, texts)]
        outputs = item.outputs
        if item.opened and outputs:
            outputs = await live_feed.stream_read(_still_running, run_id, outputs)
        for message in outputs:
            if translator.missing(message):
                message = await _buffer(run_id, message)
            frames += [ag_ui.encode(e) for e in translator.outputs([message])]
        if frames:
            yield "".join(frames)
        if translator.ended:
            return
