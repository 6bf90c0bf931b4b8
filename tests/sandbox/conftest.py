"""A worker of its own holding canary secrets, for probes that try to steal them.

The worker runs on a queue of its own (the test process sends its tasks there), with
SECRET_KEY, provider keys and the real DATABASE_URL / REDIS_URL in its environment, as a
deployment's worker would have them."""

from __future__ import annotations

import base64
import os
import time
import uuid
from contextlib import contextmanager

import pytest
from django.conf import settings

from tests.conftest import Worker, quiesce_worker

CANARY_ENV = {
    "SECRET_KEY": "canary-secret-key-" + uuid.uuid4().hex,
    "OPENAI_API_KEY": "sk-canary-openai-" + uuid.uuid4().hex,
    "ANTHROPIC_API_KEY": "sk-ant-canary-" + uuid.uuid4().hex,
}


def sandbox_works() -> bool:
    from runs.sandbox.mode import probe

    return probe()[0]


@pytest.fixture
def sandbox_must_work():
    from runs.sandbox.mode import probe

    works, why = probe()
    if not works:
        pytest.fail(f"CI runs the sandbox's boundary tests, but bubblewrap is not usable: {why}")


# On a developer's machine without bubblewrap these tests are skipped, saying why; on CI they
# fail instead, so a CI machine that lost bubblewrap cannot pass with the boundary untested.
if os.environ.get("CI") == "true":
    requires_sandbox = pytest.mark.usefixtures("sandbox_must_work")
else:
    requires_sandbox = pytest.mark.skipif(
        not sandbox_works(),
        reason="bubblewrap is not usable on this machine (apt-get install bubblewrap): the "
        "sandbox's boundary cannot be tested here",
    )


def start_private_worker(worker_env, folder, name: str, **env) -> Worker:
    """A worker of its own, on a queue of its own, with `env` over the suite's."""
    queue = f"{settings.CELERY_TASK_DEFAULT_QUEUE}-{name}"
    worker = Worker(folder / "worker.log", {**worker_env, **env, "LOOP_QUEUE": queue})
    worker.start(concurrency=3)
    worker.queue = queue
    return worker


@contextmanager
def sending_to(worker, monkeypatch):
    """This test's tasks go to `worker`'s queue; its runs are stopped afterwards."""
    from runs import dispatch

    def deliver(task_name: str, *args, countdown: float | None = None) -> None:
        dispatch.task(task_name).apply_async(args, queue=worker.queue, countdown=countdown)

    monkeypatch.setattr(dispatch, "deliver", deliver)
    yield worker
    quiesce_worker(queue=worker.queue)  # its queue idle, not only the suite's
    time.sleep(0.2)


@pytest.fixture(scope="session")
def canary_worker(worker_env, tmp_path_factory):
    worker = start_private_worker(
        worker_env, tmp_path_factory.mktemp("canary"), "canary", **CANARY_ENV
    )
    worker.secrets = [*CANARY_ENV.values(), worker.env["DATABASE_URL"]]
    if settings.LIVE_REDIS_URL:
        worker.secrets.append(settings.LIVE_REDIS_URL)
    yield worker
    worker.stop()


@pytest.fixture
def escape_worker(canary_worker, transactional_db, monkeypatch):
    """The canary worker, with this test's tasks sent to its queue."""
    with sending_to(canary_worker, monkeypatch):
        yield canary_worker


def canary_b64(worker) -> str:
    return base64.b64encode("\n".join(worker.secrets).encode()).decode()


def probe_preamble(worker, *, other_run: str, other_marker: str, victim_socket: str, token: str):
    """The settings lines a probe script starts with."""
    values = {
        "DATA_DIR": str(settings.LOOP_DATA_DIR),
        "CHECKOUT": str(settings.BASE_DIR),
        "OTHER_RUN": other_run,
        "OTHER_MARKER": other_marker,
        "WORKER_PID": str(worker.proc.pid),
        "VICTIM_SOCKET": victim_socket,
        "STOLEN_TOKEN": token,
        "CANARY_B64": canary_b64(worker),
    }
    return "".join(f"{name}='{value}'\n" for name, value in values.items())


def call_folder_of(workdir) -> str:
    """The private folder of the agent call working in `workdir`, as the worker made it
    (read from the sandbox launcher's command line on this machine)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                words = handle.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if not words or not words[0].endswith("bwrap") or "/run/loop" not in words:
            continue
        if "--chdir" in words and words[words.index("--chdir") + 1] == str(workdir):
            return words[words.index("/run/loop") - 1]
    return ""


@pytest.fixture
def plane_recipe(make_recipe):
    """A step-machine recipe from YAML (its slug is its id)."""

    def make(source: str):
        import yaml

        return make_recipe(source, slug=yaml.safe_load(source)["id"])

    return make
