"""Two worker processes on a queue of their own (as on two hosts), with quick polls and
short slot leases, for the provider limits' tests."""

from __future__ import annotations

import pytest

from tests.providers.conftest import (  # noqa: F401 - fixtures for this folder's tests
    fake_ai,
    fake_ai_server,
    start,
    test_key_env_allowed,
)
from tests.sandbox.conftest import sending_to, start_private_worker

QUICK = {
    "LOOP_PROVIDER_POLL_SECONDS": "1",
    "LOOP_PROVIDER_SLOT_LEASE_SECONDS": "6",
    "LOOP_STALE_PENDING_SECONDS": "30",
}


@pytest.fixture
def limits_workers(worker_env, tmp_path, transactional_db, monkeypatch):
    """Two `celery worker` processes of two processes each, reading one private queue;
    this test's tasks go there."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = start_private_worker(worker_env, tmp_path / "a", "limits", **QUICK)
    second = start_private_worker(worker_env, tmp_path / "b", "limits", **QUICK)
    try:
        with sending_to(first, monkeypatch):
            yield first, second
    finally:
        first.stop()
        second.stop()
