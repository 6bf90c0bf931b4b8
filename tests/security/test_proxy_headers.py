"""X-Forwarded-For is a client's own words unless a proxy in front says so (BEHIND_PROXY):
naming a new address on every failed sign-in does not escape the per-address lock."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid

import httpx
import pytest
from django.conf import settings
from django.core.cache import caches
from django.test import Client, RequestFactory

from console.management.commands.serve import proxy_options
from console.throttle import _keys
from tests.conftest import ROOT

pytestmark = pytest.mark.django_db

ATTEMPTS = 35  # more than LOOP_LOGIN_FAILURES_PER_ADDRESS (30)
LOCKED = "Too many failed sign-in attempts"


def forget(*addresses: str) -> None:
    cache = caches["throttle"]
    for address in addresses:
        key = f"login:addr:{address}"
        cache.delete_many([key, key + ":until"])


@pytest.fixture
def clean_counters():
    """The shared counters these tests fill (the local address, the forwarded bucket) are
    emptied before and after, so no other test of this process finds them locked."""
    forget("127.0.0.1", "forwarded")
    yield
    forget("127.0.0.1", "forwarded")


def test_serve_starts_uvicorn_without_proxy_headers_unless_behind_a_proxy(settings):
    settings.BEHIND_PROXY = False
    assert proxy_options() == ["--no-proxy-headers"]
    settings.BEHIND_PROXY = True
    assert proxy_options() == ["--proxy-headers"]


@pytest.fixture
def served(worker_env, tmp_path, clean_counters):
    """uvicorn as `manage.py serve` starts it (BEHIND_PROXY off), on a free local port."""
    from tests.conftest import _free_port

    assert not settings.BEHIND_PROXY
    port = _free_port()
    log_path = tmp_path / "uvicorn.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "console.asgi:application"]
            + ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
            + proxy_options(),
            cwd=ROOT,
            env={k: v for k, v in worker_env.items() if k != "BEHIND_PROXY"},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(url + "/healthz", timeout=5).status_code in (200, 503):
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start:\n" + log_path.read_text()[-3000:])
        time.sleep(0.1)
    yield url
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_rotating_forwarded_for_does_not_escape_the_address_lock_on_the_served_console(
    served,
):
    """The probe's attack, against the real server: 35 failed sign-ins from 127.0.0.1, each
    naming another address in X-Forwarded-For (and another account, so no account locks)."""
    client = httpx.Client(base_url=served, timeout=60)
    page = client.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    answers = []
    for number in range(ATTEMPTS):
        answer = client.post(
            "/accounts/login/",
            data={
                "username": f"guess-{uuid.uuid4().hex[:8]}",
                "password": "nope",
                "csrfmiddlewaretoken": token,
            },
            headers={"X-Forwarded-For": f"10.9.{number}.{number + 1}"},
        )
        assert answer.status_code == 200
        answers.append(LOCKED in answer.text)
    limit = settings.LOOP_LOGIN_FAILURES_PER_ADDRESS
    assert answers == [False] * limit + [True] * (ATTEMPTS - limit)


def sign_in(client: Client, forwarded_for: str):
    return client.post(
        "/accounts/login/",
        {"username": f"guess-{uuid.uuid4().hex[:8]}", "password": "nope"},
        HTTP_X_FORWARDED_FOR=forwarded_for,
    )


def test_a_server_that_believes_the_header_still_locks_the_attempts_together(
    settings, clean_counters
):
    """uvicorn started by hand keeps its default (proxy headers from a local peer), so the
    console sees the forged address as REMOTE_ADDR: such requests share one counter. (A
    smaller limit than the default: each failure costs a password hash.)"""
    settings.LOOP_LOGIN_FAILURES_PER_ADDRESS = 4
    locked = []
    for number in range(7):
        forged = f"10.9.{number}.1"
        client = Client(REMOTE_ADDR=forged)  # what that server makes of the header
        locked.append(LOCKED in sign_in(client, forged).content.decode())
    assert locked == [False] * 4 + [True] * 3
    request = RequestFactory().post("/", REMOTE_ADDR="10.9.0.1", HTTP_X_FORWARDED_FOR="10.9.0.1")
    assert _keys(request, None) == [("login:addr:forwarded", 4)]


def test_behind_a_proxy_each_client_address_counts_for_itself(settings, clean_counters):
    """With BEHIND_PROXY the address the proxy names is the client's: many clients do not
    lock each other out, and one client is still locked after its failures."""
    settings.BEHIND_PROXY = True
    settings.LOOP_LOGIN_FAILURES_PER_ADDRESS = 4
    addresses = [f"test-{uuid.uuid4().hex}" for _ in range(7)]
    try:
        for address in addresses:
            client = Client(REMOTE_ADDR=address)
            assert LOCKED not in sign_in(client, address).content.decode()
        one = Client(REMOTE_ADDR=addresses[0])
        for _ in range(settings.LOOP_LOGIN_FAILURES_PER_ADDRESS - 1):
            sign_in(one, addresses[0])
        assert LOCKED in sign_in(one, addresses[0]).content.decode()
    finally:
        forget(*addresses)
