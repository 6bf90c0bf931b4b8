"""A flood of anonymous requests cannot exhaust PostgreSQL's connections.

A real uvicorn (the server `make run` starts) on the test database takes 150 concurrent
requests carrying bad bearer tokens — each one costs a token lookup — while a signed-in
person keeps using the console and `/healthz` is asked how things are. The web process
holds at most its pool's worth of connections throughout.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest
from django.conf import settings
from django.db import connection

from console.models import ApiToken
from tests.conftest import ROOT, make_user

pytestmark = pytest.mark.skipif(
    not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"),
    reason="the connection pool is PostgreSQL's (the embedded SQLite default has no server)",
)

POOL_SIZE = 4
FLOOD = 150


@pytest.fixture
def web_server(worker_env, tmp_path):
    from tests.conftest import _free_port

    port = _free_port()
    log_path = tmp_path / "uvicorn.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "console.asgi:application"]
            + ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
            cwd=ROOT,
            # A plain-HTTP trial on PostgreSQL, as a person would start one: no test flag.
            env={
                **{k: v for k, v in worker_env.items() if k != "LOOP_TESTING"},
                "LOOP_DB_POOL_SIZE": str(POOL_SIZE),
                # Its own name: the browser suite's server may share this database.
                "LOOP_DB_APPLICATION_NAME": APP_NAME,
            },
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(url + "/healthz", timeout=5).status_code == 200:
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


APP_NAME = "loop-console-flood-test"


def web_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = %s",
            [APP_NAME],
        )
        return cursor.fetchone()[0]


def signed_in_client(url: str, username: str) -> httpx.Client:
    client = httpx.Client(base_url=url, timeout=60)
    page = client.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    response = client.post(
        "/accounts/login/",
        data={"username": username, "password": "pw-" + username, "csrfmiddlewaretoken": token},
    )
    assert response.status_code == 302, response.text[:500]
    return client


async def flood(url: str, cookies: httpx.Cookies) -> dict:
    limits = httpx.Limits(max_connections=FLOOD + 10)
    async with (
        httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as anonymous,
        httpx.AsyncClient(base_url=url, timeout=120, cookies=cookies) as person,
    ):
        bad = [
            anonymous.get("/api/runs", headers={"Authorization": f"Bearer lc_forged{i:04d}"})
            for i in range(FLOOD)
        ]
        results = await asyncio.gather(
            *bad, person.get("/api/runs"), anonymous.get("/healthz"), return_exceptions=True
        )
    return {"anonymous": results[:FLOOD], "person": results[FLOOD], "health": results[-1]}


def test_a_flood_of_bad_tokens_gets_401s_while_people_are_served(
    web_server, transactional_db, django_user_model
):
    make_user(django_user_model, "vera", "viewer")
    person = signed_in_client(web_server, "vera")

    outcome: dict = {}
    burst = threading.Thread(
        target=lambda: outcome.update(asyncio.run(flood(web_server, person.cookies)))
    )
    peak = 0
    burst.start()
    while burst.is_alive():
        peak = max(peak, web_connections())
        burst.join(timeout=0.02)
    peak = max(peak, web_connections())

    failures = [r for r in outcome["anonymous"] if isinstance(r, Exception)]
    assert not failures, failures[:3]
    codes = [r.status_code for r in outcome["anonymous"]]
    assert codes == [401] * FLOOD
    assert "Invalid API token" in outcome["anonymous"][0].json()["detail"]
    assert outcome["person"].status_code == 200
    assert outcome["health"].status_code == 200
    assert outcome["health"].json()["database"] == "ok"
    assert 1 <= peak <= POOL_SIZE, f"the web process held {peak} connections"

    # And afterwards, everything still works.
    assert person.get("/api/runs").status_code == 200
    assert httpx.get(web_server + "/healthz", timeout=30).json()["status"] == "ok"
    assert web_connections() <= POOL_SIZE


def test_a_valid_token_is_served_by_the_pooled_server(
    web_server, transactional_db, django_user_model
):
    user = make_user(django_user_model, "otto", "operator")
    _, secret = ApiToken.issue(user, name="script")
    response = httpx.get(
        web_server + "/api/runs", headers={"Authorization": f"Bearer {secret}"}, timeout=60
    )
    assert response.status_code == 200


def test_the_pool_finds_out_about_dropped_connections_before_a_request_does(
    web_server, viewer, transactional_db
):
    """A database restart (here: every web connection terminated) costs no request a 500:
    the pool checks a connection before it hands it out."""
    person = signed_in_client(web_server, viewer.username)
    assert person.get("/api/runs").status_code == 200
    assert web_connections() >= 1
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = %s",
            [APP_NAME],
        )
    answers = [person.get("/api/runs").status_code for _ in range(POOL_SIZE + 2)]
    assert answers == [200] * (POOL_SIZE + 2)
