"""Shared fixtures: personas, a real Celery worker process, the console served by uvicorn,
helpers to wait for runs."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent


# --- personas --------------------------------------------------------------------------


def make_user(django_user_model, username: str, *groups: str, **extra):
    from django.contrib.auth.models import Group

    from console.roles import ensure_roles

    ensure_roles()
    user = django_user_model.objects.create_user(username, password="pw-" + username, **extra)
    user.groups.set(Group.objects.filter(name__in=groups))
    return user


@pytest.fixture
def viewer(django_user_model):
    return make_user(django_user_model, "vera", "viewer")


@pytest.fixture
def operator(django_user_model):
    return make_user(django_user_model, "otto", "operator")


@pytest.fixture
def editor(django_user_model):
    return make_user(django_user_model, "edie", "editor")


@pytest.fixture
def shell_author(django_user_model):
    return make_user(django_user_model, "shelly", "recipe author with shell")


@pytest.fixture
def outsider(django_user_model):
    return make_user(django_user_model, "oscar")


@pytest.fixture
def admin_user(django_user_model):
    return make_user(django_user_model, "ada", "editor", is_staff=True, is_superuser=True)


# --- recipes ---------------------------------------------------------------------------


@pytest.fixture
def make_recipe(db):
    """Create a Recipe (with its first version) from YAML text."""
    from recipes.editing import SourceInvalid, create_recipe

    def make(source: str, slug: str = "test-recipe", **fields):
        try:
            recipe, _ = create_recipe(source, slug=slug, **fields)
        except SourceInvalid as exc:
            raise AssertionError([str(p) for p in exc.result.errors]) from None
        return recipe

    return make


@pytest.fixture
def bundled(db):
    """Sync the bundled recipes into the test database."""
    from recipes.models import Recipe
    from recipes.sync import sync

    sync()
    return {r.slug: r for r in Recipe.objects.all()}


# --- script runtimes ----------------------------------------------------------------


def requires_runtime(name: str):
    """A mark that skips the test, saying why, when the workers cannot find the script
    runtime `name` (`uv`, `bun`) the way they look for it (loops.workflow.script). `make dev`
    installs bun from the npm registry when npm is there; without it the tests of
    `runtime: bun` are skipped, not failed."""
    from loops.workflow.script import find_runtime

    return pytest.mark.skipif(
        find_runtime(name) is None,
        reason=f"{name} is not installed (`make dev` installs it with npm): the scripts with "
        f"runtime: {name} cannot run here",
    )


# --- a real worker ---------------------------------------------------------------------


def _database_url() -> str:
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    auth = db.get("USER") or "postgres"
    if db.get("PASSWORD"):
        auth += ":" + db["PASSWORD"]
    return f"postgres://{auth}@{host}:{port}/{db['NAME']}"


WORKER_APP_NAME = "loop-console-test-worker"


class Worker:
    """A `celery worker` process on the queue and database named in `env`."""

    name_prefix = "test"

    def __init__(self, log_path: Path, env: dict, options: tuple[str, ...] = ()):
        self.log_path = log_path
        self.env = env
        self.options = options  # more `celery worker` options (`--include MODULE`)
        self.proc: subprocess.Popen | None = None

    def start(self, concurrency: int = 4):
        test = RUNNING_TEST[0]
        if test is not None and test.get_closest_marker("worker") is None:
            raise RuntimeError(
                f"{test.nodeid} starts a Celery worker but is not marked `worker`: add the "
                "fixture that starts it to WORKER_FIXTURES (tests/conftest.py), or mark the test"
            )
        self.log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "console",
                "worker",
                "--loglevel",
                "INFO",
                "--concurrency",
                str(concurrency),
                "-Q",
                self.env["LOOP_QUEUE"],
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-n",
                f"{self.name_prefix}-{os.getpid()}-{time.monotonic_ns()}@%h",
                *self.options,
            ],
            cwd=ROOT,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if b"ready." in self.log_path.read_bytes():
                return self
            if self.proc.poll() is not None:
                raise RuntimeError("worker died:\n" + self.log_path.read_text()[-3000:])
            time.sleep(0.1)
        raise RuntimeError("worker did not become ready:\n" + self.log_path.read_text()[-3000:])

    def stop(self, sig=None):
        import signal

        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig or signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if getattr(self, "log", None):
            self.log.close()


# The fixtures that start a real Celery worker process (`Worker.start`), and those that
# launch Chromium: a test using one, directly or through another fixture, is marked
# `worker` or `browser` from its fixtures (below), so `-m "not worker"` leaves out every
# test that needs a worker without each file having to say so. A new fixture that starts
# a worker or a browser belongs here.
WORKER_FIXTURES = frozenset(
    {
        "celery_worker",  # the session's worker (`live_worker` uses it)
        "canary_worker",  # tests/sandbox: private workers
        "doomed_worker",
        "unsandboxed_worker",
        "required_worker",
        "toy_worker_process",  # tests/toy_kind
        "fault_engine",  # tests/faults: starts the workers each test asks for
        "beat_worker",  # tests/triggers: a worker running beat
        "limits_workers",  # tests/limits: two workers on a queue of their own
        "tracing_worker_process",  # tests/telemetry: a worker exporting traces
    }
)
BROWSER_FIXTURES = frozenset({"chromium", "page"})


# The test being run (its setup, call and teardown), for Worker.start's check that every
# test starting a worker is marked so.
RUNNING_TEST: list = [None]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    RUNNING_TEST[0] = item


def pytest_collection_modifyitems(config, items):
    """Mark each test from its fixtures (`item.fixturenames` is their whole closure):
    `worker` for one of WORKER_FIXTURES, `browser` for one of BROWSER_FIXTURES.

    Then browser tests last. Their session-wide Playwright keeps an event loop running in
    the test process, where a later in-process `asyncio.run` (a Python loop's workflow)
    would refuse to start. xdist hands tests out in this order, so a process that has run a
    browser test is given only browser tests after it."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & WORKER_FIXTURES and item.get_closest_marker("worker") is None:
            item.add_marker(pytest.mark.worker)
        if fixtures & BROWSER_FIXTURES and item.get_closest_marker("browser") is None:
            item.add_marker(pytest.mark.browser)
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)


@pytest.fixture(scope="session", autouse=True)
def embedded_broker():
    """The bundled Redis when nothing names one: started once for the session (unless one
    already answers on its socket) and stopped at its end — after the workers and servers
    that use it, which depend on this — so `make test` leaves no process behind. Started
    before the first test (autouse): a test that only sends a task on commit, with no
    worker, needs a broker too, whichever test an xdist process happens to run first."""
    if not settings.EMBEDDED_BROKER:
        yield None
        return
    from console import embedded

    started = embedded.start()
    yield started
    if started is not None:
        started.terminate()
        try:
            started.wait(timeout=20)
        except subprocess.TimeoutExpired:
            started.kill()
            started.wait()


@pytest.fixture(scope="session")
def worker_env(embedded_broker, django_db_setup, django_db_blocker, tmp_path_factory):
    # The values below are already this xdist process's own (console/settings.py): the
    # children must not add the xdist suffix a second time to a queue a test chose. And a
    # worker is no web process: importing console.wsgi or console.asgi (the API fuzz test
    # does, at collection) marks this process as one, which would hand every worker the
    # web's pooled, differently named connections instead of its own kept ones.
    not_inherited = {"PYTEST_XDIST_WORKER", "LOOP_WEB_PROCESS"}
    inherited = {k: v for k, v in os.environ.items() if k not in not_inherited}
    env = {
        **inherited,
        "DATABASE_URL": _database_url(),
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "LOOP_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE,
        "LOOP_DATA_DIR": str(settings.LOOP_DATA_DIR),
        "LOOP_DEMO_DELAY": os.environ.get("LOOP_DEMO_DELAY", "0.002"),
        "LOOP_TESTING": "1",
        # How the workers' database connections show in pg_stat_activity.
        "PGAPPNAME": WORKER_APP_NAME,
        # Webhook receivers started by the tests listen here; their retries come quickly.
        "LOOP_WEBHOOK_HOSTS": "127.0.0.1",
        "LOOP_NOTIFY_RETRY_SECONDS": "1",
        "LOOP_WORKER_HEARTBEAT_SECONDS": "2",
    }
    return env


@pytest.fixture(scope="session", autouse=True)
def fresh_live_buffers():
    """Live output buffers are keyed by run id, and a new test database numbers runs from
    1 again: a buffer left by an earlier session must not show up on this one's pages."""
    clear_live_buffers()


def clear_live_buffers() -> None:
    """Drop every live output buffer (also between tests where run ids repeat: on SQLite a
    rolled-back test gives its run's id back to the next one)."""
    if not settings.LIVE_REDIS_URL:
        return
    import redis

    from runs import live

    client = redis.Redis.from_url(settings.LIVE_REDIS_URL)
    try:
        for pattern in (f"{live.PREFIX}:out:*", f"{live.PREFIX}:outs:*"):
            for key in client.scan_iter(match=pattern, count=1000):
                client.delete(key)
    except (redis.RedisError, OSError):
        pass  # no Redis running (embedded mode starts it later): nothing was left either
    finally:
        client.close()


@pytest.fixture(scope="session")
def celery_worker(worker_env, tmp_path_factory):
    """One real worker process for the whole session, on the test database and broker."""
    worker = Worker(tmp_path_factory.mktemp("worker") / "worker.log", worker_env).start()
    yield worker
    worker.stop()


@pytest.fixture
def live_worker(celery_worker, transactional_db):
    """Use in tests whose runs go through the real worker (rows must be committed).

    Afterwards the test's unfinished runs are cancelled and the worker left idle before the
    tables are emptied for the next test: a task still writing while they are truncated
    could deadlock the flush, or carry one test's work into the next."""
    yield celery_worker
    quiesce_worker()


def quiesce_worker(timeout: float = 60, queue: str = "") -> None:
    """`queue`: the one a worker of its own reads (default: the suite's)."""
    from django.db import connection, transaction

    from runs.actor import ENGINE
    from runs.executor.state import lock_run
    from runs.models import Run

    for run_id in Run.objects.exclude(status__in=Run.TERMINAL).values_list("pk", flat=True):
        with transaction.atomic():
            run = lock_run(run_id, with_recipe=False)
            if run is not None and not run.is_terminal:
                run.stop_all_work("the test ended", ENGINE)
                run.set_status(Run.Status.CANCELLED, error="the test ended")
    idle_checks = 0
    deadline = time.monotonic() + timeout
    while idle_checks < 3 and time.monotonic() < deadline:
        idle_checks = idle_checks + 1 if _worker_idle(connection, queue) else 0
        time.sleep(0.05)


def _worker_idle(connection, queue: str = "") -> bool:
    """Nothing queued or reserved for the test queue, and no worker connection in the middle
    of a statement or a transaction."""
    import json

    import redis

    queue = queue or settings.CELERY_TASK_DEFAULT_QUEUE
    if settings.LIVE_REDIS_URL:
        client = redis.Redis.from_url(settings.LIVE_REDIS_URL)
        try:
            if client.llen(queue):
                return False
            for raw in client.hvals("unacked"):
                try:
                    if json.loads(raw)[2] == queue:
                        return False
                except (ValueError, IndexError, TypeError):
                    continue
        finally:
            client.close()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name = %s AND state <> 'idle'",
                [WORKER_APP_NAME],
            )
            if cursor.fetchone()[0]:
                return False
    return True


# On a busy machine (two cores shared with other suites, or a CPU hog) a worker can take
# many times longer than on a quiet one. A wait returns as soon as its event happens, so
# generous limits cost nothing when things go right.
WAIT_SCALE = float(os.environ.get("LOOP_TEST_WAIT_SCALE", "3"))
WAIT_MIN_SECONDS = 10 * WAIT_SCALE


def wait_for(predicate, timeout: float = 30, interval: float = 0.05, message: str = ""):
    """Call `predicate` every `interval` seconds until it returns something true, and return
    that; fail if it has not after the scaled timeout.

    `timeout` is what the wait takes on a quiet machine, not a window the test measures: it
    is multiplied by LOOP_TEST_WAIT_SCALE (default 3, so that a busy 2-core machine passes;
    raise it on a slower one) and never less than 10 s times that scale (30 s by default).
    A test that must see something happen quickly asserts that itself; a test waits for an
    event, never for wall-clock time to pass. The whole test is still bounded by pytest's
    timeout (pyproject.toml)."""
    timeout = max(timeout * WAIT_SCALE, WAIT_MIN_SECONDS)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message or predicate}")


def wait_run(run, *states, timeout: float = 60):
    """Wait until the run reaches one of `states` (default: terminal or paused)."""
    states = states or ("completed", "failed", "cancelled", "paused")

    def reached():
        run.refresh_from_db()
        return run.status in states

    wait_for(reached, timeout, message=f"run {run.pk} to reach {states} (now {run.status})")
    return run


def pending_gate(run):
    """The run's gate waiting for a decision, if any."""
    return run.gates.filter(status="pending").select_related("iteration").first()


# --- the console served by uvicorn ----------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def console_server(worker_env, tmp_path_factory):
    """`uvicorn console.asgi:application` on a free port, on the test database."""
    port = _free_port()
    # In the data folder (kept after the session), so a failure can be read afterwards.
    log_path: Path = Path(settings.LOOP_DATA_DIR) / "uvicorn.log"
    log = open(log_path, "ab")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "console.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        # Not labelled as a worker: tests that count the workers' connections see only theirs.
        env={**worker_env, "PGAPPNAME": "loop-console-test-web"},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    wait_until_serving(url + "/healthz", proc, log_path, "uvicorn")
    yield url
    stop_group(proc)
    log.close()


def wait_until_serving(url: str, proc: subprocess.Popen, log_path: Path, what: str) -> None:
    """Until `url` answers 200; a process that exits, or 30 s, fails with its log's end."""
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start:\n" + log_path.read_text()[-3000:])
        time.sleep(0.1)


def stop_group(proc: subprocess.Popen) -> None:
    """Stop a process started in a session of its own, and its children."""
    os.killpg(proc.pid, 15)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()


@pytest.fixture
def in_process(monkeypatch):
    """Run what the kernel sends here, in order (no worker): returns the drain function."""
    from runs import dispatch

    sent = []
    monkeypatch.setattr(dispatch, "deliver", lambda name, *args, **kw: sent.append((name, args)))

    def drain():
        while sent:
            name, args = sent.pop(0)
            dispatch.task(name)(*args)

    return drain
