"""A worker that runs beat (django-celery-beat's database schedule), for the schedules'
tests."""

from __future__ import annotations

import pytest

from tests.conftest import Worker, quiesce_worker


class BeatWorker(Worker):
    name_prefix = "beat"


@pytest.fixture
def beat_worker(worker_env, transactional_db, tmp_path):
    """A `celery worker -B` on the suite's queue (what the test process sends, a run's end
    announced here, reaches it); `.restart(sig, while_down=f)` kills it (and its beat),
    calls `f` while nothing runs, and starts it again."""
    worker = BeatWorker(tmp_path / "beat.log", worker_env, options=("-B",))

    starts = iter(range(1, 100))

    def restart(sig=None, while_down=None):
        worker.stop(sig)
        if while_down is not None:
            while_down()
        worker.log_path = tmp_path / f"beat-{next(starts)}.log"  # `start` waits for "ready."
        worker.start(concurrency=2)

    worker.restart = restart
    worker.start(concurrency=2)
    yield worker
    from triggers.models import Schedule

    Schedule.objects.update(enabled=False)  # a firing still on its way starts nothing
    quiesce_worker()
    worker.stop()
