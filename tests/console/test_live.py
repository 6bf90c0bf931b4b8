"""The live stream (server-sent events from an async view reading Redis pub/sub)."""

import json

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.test import AsyncClient
from django.urls import reverse

from runs import live
from runs.live_views import merge_output, run_change_events, sse
from tests.conftest import clear_live_buffers

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_output_left_by_an_earlier_test(embedded_broker):
    """A test here publishes output for its run; on SQLite the next test's run gets the same
    id (its insert was rolled back), so that buffer would reach the next stream."""
    clear_live_buffers()
    yield
    clear_live_buffers()


def read_stream(user, url, *, until, then=None, headers=None):
    """Open the stream, run `then`, read until `until` shows up, close the stream."""
    client = AsyncClient()
    client.force_login(user)

    async def go():
        response = await client.get(url, headers=headers or {})
        assert response.status_code == 200
        assert response["Content-Type"] == "text/event-stream"
        stream = response.streaming_content.__aiter__()
        received = (await anext(stream)).decode()  # retry: ...
        if then:
            then()
        while until not in received:
            received += (await anext(stream)).decode()
        await stream.aclose()
        return received

    return async_to_sync(go)()


def test_catch_up_on_connect(viewer, gated_run):
    run, _ = gated_run
    text = read_stream(viewer, reverse("run_live", args=[run.pk]) + "?after=0", until="gate-")
    assert "retry: 1000" in text
    assert f"event: run-changed\nid: {run.last_seq}" in text
    assert "event: gate-changed" in text


def test_last_event_id_means_nothing_missed(viewer, gated_run):
    run, _ = gated_run
    run.refresh_from_db()

    def publish():
        live.publish_output(run.pk, 42, "<img src=x onerror=alert(1)>\nnext line")

    text = read_stream(
        viewer,
        reverse("run_live", args=[run.pk]),
        then=publish,
        headers={"Last-Event-ID": str(run.last_seq)},
        until="next line",
    )
    assert "run-changed" not in text
    # JSON the page's script places as text, never as markup.
    [event] = [e for e in parse_sse(text) if e.get("event") == "output"]
    assert json.loads(event["data"]) == {
        "target": "it-42",
        "offset": 0,
        "text": "<img src=x onerror=alert(1)>\nnext line",
    }


def test_a_page_opened_mid_iteration_gets_what_was_written_before(viewer, gated_run):
    """The agent wrote two chunks before the page opened (the database copy may not have
    them yet): the stream starts with both, then carries on from their end."""
    run, _ = gated_run
    live.publish_output(run.pk, 7, "line 1\n", offset=0)
    live.publish_output(run.pk, 7, "line 2\n", offset=7)
    live.publish_output(run.pk, -3, "node text", offset=0)

    text = read_stream(
        viewer,
        reverse("run_live", args=[run.pk]),
        then=lambda: live.publish_output(run.pk, 7, "line 3\n", offset=14),
        headers={"Last-Event-ID": str(run.last_seq)},
        until="line 3",
    )
    outputs = [json.loads(e["data"]) for e in parse_sse(text) if e.get("event") == "output"]
    assert {"target": "it-7", "offset": 0, "text": "line 1\nline 2\n"} in outputs
    assert {"target": "node-3", "offset": 0, "text": "node text"} in outputs
    assert outputs[-1] == {"target": "it-7", "offset": 14, "text": "line 3\n"}


def test_chunks_of_one_batch_are_joined_per_target():
    chunks = [
        {"type": "output", "target": "it-1", "offset": 0, "chunk": "a"},
        {"type": "output", "target": "it-2", "offset": 5, "chunk": "x"},
        {"type": "output", "target": "it-1", "offset": 1, "chunk": "b"},
        {"type": "output", "target": "it-1", "offset": 9, "chunk": "after a gap"},
    ]
    assert merge_output(chunks) == [
        {"target": "it-1", "offset": 0, "text": "ab"},
        {"target": "it-2", "offset": 5, "text": "x"},
        {"target": "it-1", "offset": 9, "text": "after a gap"},
    ]


def test_published_events_name_the_fragments_to_refresh(viewer, gated_run):
    run, _ = gated_run
    run.refresh_from_db()

    def publish():
        live.publish_event(
            run.pk, {"seq": run.last_seq + 1, "kind": "gate_decided", "step": "refine", "data": {}}
        )

    text = read_stream(
        viewer,
        reverse("run_live", args=[run.pk]) + f"?after={run.last_seq}",
        then=publish,
        until="gate-changed",
    )
    assert f"event: run-changed\nid: {run.last_seq + 1}" in text
    assert "event: gate-changed" in text


def test_inbox_stream_says_inbox_changed(viewer, gated_run):
    run, _ = gated_run

    def publish():
        live.publish_event(run.pk, {"seq": 99, "kind": "run_completed", "step": "", "data": {}})

    client = AsyncClient()
    client.force_login(viewer)

    async def go():
        response = await client.get(reverse("inbox_live"))
        stream = response.streaming_content.__aiter__()
        first = (await anext(stream)).decode()
        publish()
        second = (await anext(stream)).decode()
        await stream.aclose()
        return first + second

    text = async_to_sync(go)()
    assert "event: inbox-changed" in text


def test_change_event_names():
    assert run_change_events({"node_completed"}) == ["run-changed"]
    assert run_change_events({"iteration_started"}) == ["run-changed", "iterations-changed"]
    assert "gate-changed" in run_change_events({"approval_requested"})
    assert sse("x", "a\nb", 3) == "event: x\nid: 3\ndata: a\ndata: b\n\n"


def test_permissions_and_unknown_run(viewer, outsider, gated_run):
    run, _ = gated_run

    async def status(user, url):
        client = AsyncClient()
        await client.aforce_login(user)
        return (await client.get(url)).status_code

    assert async_to_sync(status)(outsider, reverse("run_live", args=[run.pk])) == 403
    assert async_to_sync(status)(viewer, reverse("run_live", args=[999999])) == 404
    assert async_to_sync(status)(outsider, reverse("inbox_live")) == 403


def test_under_wsgi_the_stream_answers_once_and_ends(client, viewer, gated_run):
    run, _ = gated_run
    run.refresh_from_db()
    client.force_login(viewer)
    url = reverse("run_live", args=[run.pk])
    behind = b"".join(client.get(url + "?after=0").streaming_content).decode()
    assert behind.startswith("retry: 3000") and f"event: run-changed\nid: {run.last_seq}" in behind
    current = b"".join(client.get(url, HTTP_LAST_EVENT_ID=str(run.last_seq)).streaming_content)
    assert current.decode() == "retry: 3000\n\n"
    inbox = b"".join(client.get(reverse("inbox_live")).streaming_content).decode()
    assert inbox == "retry: 3000\n\n"


def test_post_is_405(client, viewer, gated_run):
    run, _ = gated_run
    client.force_login(viewer)
    assert client.post(reverse("run_live", args=[run.pk])).status_code == 405


def parse_sse(text: str) -> list[dict]:
    """The browser's reading of a stream (the HTML spec's algorithm): a field ends at CR,
    LF or CRLF; a blank line dispatches the event."""
    events, fields, data = [], {}, []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if not line:
            if data or fields:
                events.append({**fields, "data": "\n".join(data)})
            fields, data = {}, []
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            data.append(value)
        elif name in ("event", "id", "retry"):
            fields[name] = value
    return events


HOSTILE_OUTPUT = "one\rid: 999\r\nevent: x\nretry: 1\r\rtwo\n\nthree"


def test_output_cannot_add_fields_to_the_stream(viewer, gated_run):
    run, _ = gated_run
    run.refresh_from_db()

    def publish():
        live.publish_output(run.pk, 42, HOSTILE_OUTPUT)
        live.publish_event(
            run.pk, {"seq": run.last_seq + 1, "kind": "gate_decided", "step": "", "data": {}}
        )

    text = read_stream(
        viewer,
        reverse("run_live", args=[run.pk]) + f"?after={run.last_seq}",
        then=publish,
        until="gate-changed",
    )
    events = parse_sse(text)
    assert not any(e.get("event") == "x" or e.get("id") == "999" for e in events)
    assert not any("retry" in e for e in events[1:])  # only the stream's own, first
    [output] = [json.loads(e["data"]) for e in events if e.get("event") == "output"]
    assert output["text"] == HOSTILE_OUTPUT  # every byte, carriage returns included
    assert [e["id"] for e in events if "id" in e] == [str(run.last_seq + 1)] * 2


def test_sse_splits_every_kind_of_line_break():
    assert sse("x", "a\rb\r\nc\nd") == "event: x\ndata: a\ndata: b\ndata: c\ndata: d\n\n"
    assert sse("x\rid: 9", "") == "event: xid: 9\ndata: \n\n"


@pytest.mark.skipif(not settings.LIVE_REDIS_URL, reason="the hub exists only with Redis")
def test_open_pages_of_a_process_share_one_redis_subscriber(viewer, gated_run):
    """Five open pages, one Redis pub/sub connection; one event reaches all five."""
    import redis

    from runs import live_hub

    run, _ = gated_run
    run.refresh_from_db()
    client = AsyncClient()
    client.force_login(viewer)
    url = reverse("run_live", args=[run.pk]) + f"?after={run.last_seq}"
    redis_client = redis.Redis.from_url(settings.LIVE_REDIS_URL)

    def hub_connections() -> int:
        listed = redis_client.client_list(_type="pubsub")
        return sum(1 for c in listed if c.get("name") == live_hub.HUB_CLIENT_NAME)

    async def go():
        streams = []
        for _ in range(5):
            response = await client.get(url)
            stream = response.streaming_content.__aiter__()
            await anext(stream)  # subscribed
            streams.append(stream)
        connections = hub_connections()
        live.publish_event(
            run.pk, {"seq": run.last_seq + 1, "kind": "gate_decided", "step": "", "data": {}}
        )
        received = []
        for stream in streams:
            text = ""
            while "gate-changed" not in text:
                text += (await anext(stream)).decode()
            received.append(text)
            await stream.aclose()
        return connections, received

    connections, received = async_to_sync(go)()
    redis_client.close()
    assert connections == 1
    assert all(f"event: gate-changed\nid: {run.last_seq + 1}" in text for text in received)


def test_a_page_that_falls_behind_is_cut_off_to_catch_up():
    from runs.live_hub import MAX_PENDING, Batch, Listener

    async def go():
        listener = Listener("channel")
        for _ in range(MAX_PENDING):
            listener.push(Batch([{"type": "event"}]))
        kept = len(await listener.next_batches(1))
        for _ in range(MAX_PENDING + 1):
            listener.push(Batch([{"type": "event"}]))
        return kept, await listener.next_batches(1)

    kept, after_overflow = async_to_sync(go)()
    assert kept == MAX_PENDING
    assert after_overflow is None  # the stream ends; the browser reconnects with Last-Event-ID


def test_a_last_event_id_behind_the_run_catches_up_at_once(viewer, gated_run):
    """A page that reconnects having seen event N while the run is at N+2 is told to
    refresh at once, with the run's current seq as the new id."""
    run, _ = gated_run
    from django.db import transaction

    with transaction.atomic():
        for n in range(3):
            run.append_event("note", "refine", n=n)
    run.refresh_from_db()
    text = read_stream(
        viewer,
        reverse("run_live", args=[run.pk]),
        headers={"Last-Event-ID": str(run.last_seq - 2)},
        until="gate-changed",
    )
    assert f"event: run-changed\nid: {run.last_seq}" in text


def test_the_last_event_id_header_wins_over_the_page_url(viewer, gated_run):
    """The browser's reconnect sends Last-Event-ID to the URL the page was rendered with:
    the header (what the page has seen) counts, not the stale ?after= of the URL."""
    run, _ = gated_run
    run.refresh_from_db()

    def publish():
        live.publish_output(run.pk, 5, "still here")

    text = read_stream(
        viewer,
        reverse("run_live", args=[run.pk]) + "?after=0",
        then=publish,
        headers={"Last-Event-ID": str(run.last_seq)},
        until="still here",
    )
    assert "run-changed" not in text  # nothing missed: no refresh asked for


def test_the_live_stream_takes_an_api_token(viewer, gated_run):
    """A script follows a run with a token (read scope) as a browser does with its session;
    a bad token is refused with 401, not sent to the login page."""
    from datetime import timedelta

    from django.test import Client
    from django.utils import timezone

    from console.models import ApiToken

    run, _ = gated_run
    url = reverse("run_live", args=[run.pk])
    read = ApiToken.issue(viewer, scope="read")[1]
    answer = Client().get(url, headers={"Authorization": f"Bearer {read}"})
    assert answer.status_code == 200 and answer["Content-Type"] == "text/event-stream"
    assert b"run-changed" in b"".join(answer.streaming_content)

    wrong = Client().get(url, headers={"Authorization": "Bearer lc_not-a-token"})
    assert wrong.status_code == 401 and wrong["WWW-Authenticate"] == "Bearer"
    old = ApiToken.issue(viewer, expires_at=timezone.now() - timedelta(days=1))[1]
    expired = Client().get(url, headers={"Authorization": f"Bearer {old}"})
    assert expired.status_code == 401 and "expired" in expired.json()["detail"]
    metrics = ApiToken.issue(viewer, scope="metrics")[1]
    assert Client().get(url, headers={"Authorization": f"Bearer {metrics}"}).status_code == 403
    # No credentials at all: the login page, as for every page.
    assert Client().get(url).status_code == 302


def test_the_ag_ui_stream_answers_as_the_api_does(viewer, gated_run):
    from django.test import Client

    from console.models import ApiToken

    run, _ = gated_run
    url = reverse("run_ag_ui", args=[run.pk])
    read = ApiToken.issue(viewer, scope="read")[1]
    answer = Client().get(url, headers={"Authorization": f"Bearer {read}"})
    assert answer.status_code == 200 and answer["Content-Type"] == "text/event-stream"
    text = b"".join(answer.streaming_content).decode()
    assert text.startswith('data: {"type":"RUN_STARTED","threadId":"run-')
    assert Client().get(url).status_code == 401
    assert Client().get(url, headers={"Authorization": "Bearer lc_nope"}).status_code == 401
    missing = Client().get(
        reverse("run_ag_ui", args=[10**9]), headers={"Authorization": f"Bearer {read}"}
    )
    assert missing.status_code == 404
    session = Client()
    session.force_login(viewer)
    assert session.get(url).status_code == 200
