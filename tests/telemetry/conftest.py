"""Fixtures for the traces' tests: a real OTLP/HTTP receiver on 127.0.0.1, a worker of its
own that exports to it (its OTEL_* variables are set when it starts, as an operator's
are), and the provider tests' scripted OpenAI-compatible API."""

from __future__ import annotations

import pytest
from django.conf import settings

from tests.conftest import Worker, quiesce_worker

# The scripted provider and its fixtures (importing them sets the key variables the worker
# copies when it starts).
from tests.providers.conftest import (  # noqa: F401 - fixtures
    fake_ai,
    fake_ai_server,
    start,
    test_key_env_allowed,
)
from tests.telemetry.receiver import Receiver

HEADER = "x-loop-test=traces"  # sent with every export: OTEL_EXPORTER_OTLP_HEADERS


@pytest.fixture(scope="session")
def receiver_server():
    server = Receiver().start()
    yield server
    server.stop()


@pytest.fixture
def receiver(receiver_server):
    with receiver_server.lock:
        receiver_server.spans.clear()
        receiver_server.headers.clear()
    return receiver_server


@pytest.fixture(scope="module")
def tracing_worker_process(worker_env, receiver_server, tmp_path_factory):
    """A worker on a queue of its own, exporting runs to the receiver (the tests using it
    are marked `worker`)."""
    queue = f"{settings.CELERY_TASK_DEFAULT_QUEUE}-traces"
    env = {
        **worker_env,
        "LOOP_QUEUE": queue,
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver_server.url,
        "OTEL_EXPORTER_OTLP_HEADERS": HEADER,
    }
    env.pop("OTEL_SERVICE_NAME", None)  # the default name is part of what is tested
    worker = Worker(tmp_path_factory.mktemp("traces") / "worker.log", env).start(concurrency=2)
    worker.queue = queue
    yield worker
    worker.stop()


@pytest.fixture
def tracing_worker(tracing_worker_process, transactional_db, monkeypatch):
    """The tracing worker, with this test's tasks sent to its queue; its runs are stopped
    and the worker left idle afterwards."""
    from runs import dispatch

    def deliver(task_name: str, *args, countdown: float | None = None) -> None:
        queue = tracing_worker_process.queue
        dispatch.task(task_name).apply_async(args, queue=queue, countdown=countdown)

    monkeypatch.setattr(dispatch, "deliver", deliver)
    yield tracing_worker_process
    quiesce_worker(queue=tracing_worker_process.queue)
