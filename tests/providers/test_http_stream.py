"""The streaming HTTP helper: error mapping, heartbeats, cancel, idle timeout."""

from __future__ import annotations

import time
from http import HTTPStatus

import pytest

from runs.providers.base import Cancelled, ProviderError
from runs.providers.http import HttpStream, error_message, status_error, stream_error_message


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 529])
def test_overload_and_server_errors_are_transient(status):
    assert not status_error("p", status, "http://x", b"{}").permanent


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_are_permanent_and_keep_the_body_out_of_the_error(status, caplog):
    body = b'{"error": {"message": "model not found; internal-db.corp:5432"}}'
    error = status_error("p", status, "http://x/v1", body)
    assert error.permanent
    assert f"HTTP {status} " in str(error) and HTTPStatus(status).phrase in str(error)
    # Viewers read the stored error: the endpoint's answer (and its URL) stays in the log.
    assert "internal-db" not in str(error) and "http://x" not in str(error)
    assert "model not found; internal-db.corp:5432" in caplog.text


def test_error_messages_from_each_shape():
    assert error_message(b'{"type":"error","error":{"type":"x","message":"bad key"}}') == "bad key"
    assert error_message(b'{"error": "plain"}') == "plain"
    assert error_message(b"<html>gateway</html>") == "<html>gateway</html>"


def stream(url: str, on_chunk, idle: float = 30.0) -> HttpStream:
    return HttpStream(
        "p",
        url,
        headers={"authorization": "Bearer sk-fake-provider-key"},
        body={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        on_chunk=on_chunk,
        idle_timeout=idle,
    )


def test_heartbeats_while_the_server_is_silent_and_cancel_stops_it(fake_ai):
    fake_ai.delay = 3
    beats = []

    def on_chunk(text):
        beats.append(time.monotonic())
        if len(beats) >= 2:
            raise Cancelled("stop")

    started = time.monotonic()
    with pytest.raises(Cancelled):
        list(stream(fake_ai.url + "/v1/chat/completions", on_chunk).events())
    assert time.monotonic() - started < 2.5


def test_idle_timeout_ends_the_stream_with_what_arrived(fake_ai):
    fake_ai.delay = 2
    fake_ai.answers = ["one two"]
    s = stream(fake_ai.url + "/v1/chat/completions", lambda chunk: None, idle=0.6)
    events = list(s.events())
    assert s.timed_out
    assert len(events) == 1  # the role chunk came before the silence


def test_connection_refused_is_transient():
    with pytest.raises(ProviderError) as caught:
        list(stream("http://127.0.0.1:9/v1/chat/completions", lambda chunk: None).events())
    said = str(caught.value)
    assert not caught.value.permanent and "could not connect to the API" in said
    # viewers read this on the run page: no address, no exception class
    assert "127.0.0.1" not in said and "ConnectError" not in said


def test_mid_stream_error_events_keep_the_servers_text_in_the_log(caplog):
    err = {"type": "overloaded_error", "message": "upstream 10.0.0.7 said: token=abc"}
    said = stream_error_message("p", err)
    assert said == "provider 'p': the server reported overloaded_error mid-answer"
    assert "token=abc" in caplog.text
    odd = stream_error_message("p", {"type": "see http://10.0.0.7/admin"})
    assert "10.0.0.7" not in odd and odd.endswith("an error mid-answer")
    assert "10.0.0.7" not in stream_error_message("p", "plain text from 10.0.0.7")
