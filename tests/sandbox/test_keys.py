"""An agent CLI never holds its provider's key: it gets a base URL on the worker and a
stand-in key; the worker's proxy puts the real key on each request it forwards."""

from __future__ import annotations

import json

import httpx
import pytest

from runs.sandbox.keys import STAND_IN, KeyRoute, proxied_keys
from tests.providers.fakes.http_server import FakeAI

KEY = "sk-ant-the-real-key"


@pytest.fixture
def upstream():
    server = FakeAI(KEY).start()
    yield server
    server.stop()


def route(upstream) -> KeyRoute:
    return KeyRoute("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", upstream.url, "x-api-key")


def test_the_cli_gets_a_base_url_and_a_stand_in_and_the_api_gets_the_key(upstream, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    upstream.delay = 0.05
    upstream.answers = ["one two three"]
    with proxied_keys((route(upstream),), {}) as given:
        assert given["ANTHROPIC_API_KEY"] == STAND_IN and KEY not in json.dumps(given)
        body = {
            "model": "m",
            "max_tokens": 10,
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        }
        chunks = []
        with httpx.stream(
            "POST",
            given["ANTHROPIC_BASE_URL"] + "/v1/messages",
            json=body,
            headers={"x-api-key": STAND_IN},
            timeout=30,
        ) as answer:
            assert answer.status_code == 200
            chunks = [chunk for chunk in answer.iter_text() if chunk]
    assert upstream.requests[0]["headers"]["x-api-key"] == KEY
    assert len(chunks) > 1  # streamed through, not buffered into one answer
    assert "one" in "".join(chunks) and "three" in "".join(chunks)


def test_the_proxy_answers_only_under_its_secret_path_and_only_during_the_call(
    upstream, monkeypatch
):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with proxied_keys((route(upstream),), {}) as given:
        base = given["ANTHROPIC_BASE_URL"]
        origin = base.rsplit("/", 1)[0]
        guessed = httpx.post(origin + "/v1/messages", json={}, timeout=30)
        assert guessed.status_code == 404
    assert upstream.requests == []
    with pytest.raises(httpx.ConnectError):
        httpx.post(base + "/v1/messages", json={}, timeout=5)


def test_no_key_in_the_worker_means_no_proxy(upstream, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with proxied_keys((route(upstream),), {}) as given:
        assert given == {}


def test_a_key_in_the_providers_own_env_is_proxied_too(upstream, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with proxied_keys((route(upstream),), {"ANTHROPIC_API_KEY": KEY}) as given:
        assert given["ANTHROPIC_API_KEY"] == STAND_IN
