"""Agents share the worker's network (they must reach their model's API), so a broker or
database that takes no password is open to them (security probe M4). The console cannot
close that; it says so at start (runs/sandbox/exposure.py), and the docs do."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from types import SimpleNamespace

import dj_database_url
import pytest
import redis

from console import embedded
from runs.sandbox import exposure, for_run, run_process
from tests.sandbox.conftest import requires_sandbox

SQLITE = {"ENGINE": "django.db.backends.sqlite3", "NAME": "/data/console.sqlite3"}


@pytest.fixture
def configured(monkeypatch, tmp_path):
    """exposed_services() under the given URLs; no libpq password from elsewhere."""
    for name in ("PGPASSWORD", "PGPASSFILE", "PGHOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.pgpass

    def exposed(redis_url=None, broker_url=None, database_url=None):
        broker_url = broker_url or redis_url or "redis+socket:///data/redis.sock"
        database = dj_database_url.parse(database_url) if database_url else SQLITE
        fake = SimpleNamespace(
            REDIS_URL=redis_url, CELERY_BROKER_URL=broker_url, DATABASES={"default": database}
        )
        monkeypatch.setattr(exposure, "settings", fake)
        return exposure.exposed_services()

    return exposed


def test_the_embedded_default_is_not_exposed(configured):
    """A Redis on a unix socket in the data folder and a SQLite file there: the sandbox
    hides both."""
    assert configured() == []
    assert configured(database_url="sqlite:////data/other.sqlite3") == []


def test_a_redis_over_tcp_without_a_password_is_exposed(configured):
    (found,) = configured(redis_url="redis://127.0.0.1:6379/0")
    assert found == exposure.Exposed("REDIS_URL", "Redis", "127.0.0.1:6379")
    (found,) = configured(redis_url="rediss://redis.internal/0")
    assert found.address == "redis.internal:6379"
    # The same URL twice is one service; a broker of its own is another.
    found = configured(redis_url="redis://a:6379/0", broker_url="redis://b:6380/0")
    assert [(f.setting, f.address) for f in found] == [
        ("REDIS_URL", "a:6379"),
        ("CELERY_BROKER_URL", "b:6380"),
    ]
    (found,) = configured(broker_url="amqp://rabbit.internal//")
    assert (found.service, found.address) == ("AMQP", "rabbit.internal:5672")


def test_a_redis_with_a_password_or_on_a_unix_socket_is_not(configured):
    assert configured(redis_url="redis://:s3cret@127.0.0.1:6379/0") == []
    assert configured(redis_url="redis://loop:s3cret@127.0.0.1:6379/0") == []
    assert configured(redis_url="redis://127.0.0.1:6379/0?password=s3cret") == []
    assert configured(redis_url="redis+socket:///var/run/redis/redis.sock") == []
    assert configured(broker_url="amqp://loop:s3cret@rabbit.internal//") == []
    assert configured(broker_url="memory://") == []


def test_postgresql_over_tcp_without_a_password_is_exposed(configured, monkeypatch, tmp_path):
    (found,) = configured(database_url="postgres://loop@127.0.0.1:5432/loop")
    assert found == exposure.Exposed("DATABASE_URL", "PostgreSQL", "127.0.0.1:5432")
    assert configured(database_url="postgres://loop:s3cret@db.internal/loop") == []
    # A unix socket (libpq's default, or a folder named as the host) is not reachable.
    assert configured(database_url="postgres:///loop") == []
    assert configured(database_url="postgres://%2Fvar%2Frun%2Fpostgresql/loop") == []
    # libpq's own places for a host and a password count.
    monkeypatch.setenv("PGHOST", "db.internal")
    (found,) = configured(database_url="postgres:///loop")
    assert found.address == "db.internal:5432"
    (tmp_path / ".pgpass").write_text("db.internal:5432:loop:loop:s3cret\n")
    assert configured(database_url="postgres:///loop") == []


def test_the_warning_says_what_is_open_and_how_to_close_it(configured):
    configured(redis_url="redis://127.0.0.1:6379/0", database_url="postgres://loop@127.0.0.1/loop")
    redis_line, database_line = exposure.warnings()
    assert redis_line.startswith("REDIS_URL names Redis at 127.0.0.1:6379 without a password.")
    assert "Agents with network access" in redis_line and "this machine's network" in redis_line
    assert "read every run's live output" in redis_line
    assert "redis://:PASSWORD@host:6379/0" in redis_line and "requirepass" in redis_line
    assert database_line.startswith("DATABASE_URL names PostgreSQL at 127.0.0.1:5432 without")
    assert "postgres://user:PASSWORD@host:5432/db" in database_line and "trust" in database_line


def test_the_worker_warns_at_start(celery_worker):
    """The suite's own worker runs on the suite's broker and database, password-less on
    CI (.ci/run): it says so, once for each, beside its sandbox line."""
    log = celery_worker.log_path.read_text()
    assert "steps and agents run" in log
    expected = exposure.warnings()
    for warning in expected:
        (line,) = [line for line in log.splitlines() if warning in line]
        assert "WARNING" in line, line
    if not expected:  # the embedded broker and SQLite
        assert "without a password" not in log


# --- the exposure is real -------------------------------------------------------------------


@pytest.fixture
def open_redis(tmp_path):
    """A Redis on 127.0.0.1 without a password, as the README's multi-worker example once
    had it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        [str(embedded.redis_binary()), "--port", str(port), "--bind", "127.0.0.1"]
        + ["--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    client = redis.Redis(port=port, socket_timeout=1)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except (redis.RedisError, OSError):
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("the test's Redis did not start")
            time.sleep(0.05)
    yield port, client
    proc.kill()
    proc.wait()


# Subscribes to every channel, as the probe did, and prints the first message it reads.
EAVESDROP = """
import socket
s = socket.create_connection(("127.0.0.1", {port}), 5)
s.settimeout(15)
s.sendall(b"PSUBSCRIBE *\\r\\n")
seen = b""
while b"another run's output" not in seen:
    chunk = s.recv(4096)
    if not chunk:
        break
    seen += chunk
print("read:", b"another run's output" in seen)
"""


@requires_sandbox
def test_an_agent_with_the_network_reads_a_password_less_broker(open_redis, tmp_path):
    """What the start-up warning is about: a sandboxed process with the network (every
    agent's default) reads every channel of a password-less Redis on 127.0.0.1; one without
    it (a step, an agent whose node says `network: none`) cannot even connect."""
    port, client = open_redis
    script = EAVESDROP.format(port=port)
    done = threading.Event()

    def publish():
        while not done.is_set():
            client.publish("loopconsole:live:run-7", "another run's output")
            time.sleep(0.1)

    publisher = threading.Thread(target=publish, daemon=True)
    publisher.start()
    try:
        opened = run_process(
            ["python3", "-c", script],
            sandbox=for_run(None, tmp_path, network=True),
            on_chunk=lambda text: None,
        )
        closed = run_process(
            ["python3", "-c", script],
            sandbox=for_run(None, tmp_path, network=False),
            on_chunk=lambda text: None,
        )
    finally:
        done.set()
        publisher.join()
    assert opened.exit_code == 0 and "read: True" in opened.output, opened.output
    assert closed.exit_code != 0 and "Connection refused" in closed.output, closed.output
