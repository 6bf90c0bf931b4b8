"""The toy kind registered for a test, and a worker of its own that knows it.

A kind that is an app registers from its AppConfig.ready() in every process; the toy is
registered by the `toy_kind` fixture here and, in its worker, by the module that worker
imports as it starts (tests/toy_kind/in_worker.py). That worker reads a queue of its own,
so the suite's worker, which knows no toy, never takes a toy's work."""

from __future__ import annotations

import pytest
from django.conf import settings

from runs import kinds
from tests.conftest import Worker, quiesce_worker

from .kind import TOY

# Counts to 4; a person decides after 2, and after each iteration a feedback asks for.
TOY_SOURCE = "toy: counter\nname: Toy counter\nrounds: 4\ngate_after: 2\n"


@pytest.fixture
def toy_kind():
    kinds.register(TOY)
    yield TOY
    kinds.unregister(TOY.name)


@pytest.fixture(scope="session")
def toy_worker_process(worker_env, tmp_path_factory):
    queue = f"{settings.CELERY_TASK_DEFAULT_QUEUE}-toy"
    worker = Worker(
        tmp_path_factory.mktemp("toy-worker") / "worker.log",
        {**worker_env, "LOOP_QUEUE": queue},
        options=("--include", "tests.toy_kind.in_worker"),
    )
    worker.start(concurrency=2)
    worker.queue = queue
    yield worker
    worker.stop()


@pytest.fixture
def toy_worker(toy_worker_process, toy_kind, transactional_db, monkeypatch):
    """This test's work goes to the toy's worker; its unfinished runs stop afterwards."""
    from runs import dispatch, tasks

    queue = toy_worker_process.queue

    def deliver(task_name: str, *args, countdown: float | None = None) -> None:
        getattr(tasks, task_name).apply_async(args, queue=queue, countdown=countdown)

    monkeypatch.setattr(dispatch, "deliver", deliver)
    yield toy_worker_process
    quiesce_worker(queue=queue)


@pytest.fixture
def toy_recipe(toy_kind, make_recipe):
    return make_recipe(TOY_SOURCE, slug="toy-counter")
