"""A worker whose broker connection closed under a running task survives that task's late
ack: kombu acks on the old channel, whose connection is gone (AttributeError 'client',
the soak's "Unrecoverable error" 6–8 s after Redis returned). Deterministic: a channel is
closed, then its QoS acks and rejects, as Celery does when the task ends."""

from __future__ import annotations

import logging

import pytest
from django.conf import settings
from kombu import Connection

import runs.tasks  # noqa: F401 - installs the broker guard, as every worker does


@pytest.fixture
def closed_channel():
    with Connection(settings.CELERY_BROKER_URL) as connection:
        channel = connection.channel()
        channel.close()
        assert channel.connection is None  # what a dropped connection leaves
        yield channel


@pytest.mark.parametrize("settle", ["ack", "reject"])
def test_a_late_ack_on_a_closed_channel_is_given_up_not_raised(closed_channel, settle, caplog):
    qos = closed_channel.qos
    qos._delivered["tag-1"] = object()
    with caplog.at_level(logging.WARNING, logger="runs.executor.broker"):
        getattr(qos, settle)("tag-1")  # raised AttributeError('client') and ended the worker
    assert "tag-1" not in qos._delivered
    assert f"the {settle} of a finished task's message is given up" in caplog.text


def test_a_pool_process_that_died_while_the_broker_was_away_is_tracked_afresh():
    """On reconnecting, Celery registers every pool process with the event loop; one that
    exited meanwhile had its sentinel untracked (None): `fileno(None)` raised ValueError and
    the worker exited (seen in this issue's soak). Now its exit is watched again."""
    import os
    from types import SimpleNamespace

    from celery.concurrency.asynpool import AsynPool

    read, write = os.pipe()
    os.close(write)  # a dead process's sentinel: readable at once
    proc = SimpleNamespace(_sentinel_poll=None, _popen=SimpleNamespace(sentinel=read))
    added = []
    hub = SimpleNamespace(add_reader=lambda fd, *args: added.append(fd))
    pool = SimpleNamespace(_event_process_exit=lambda *args: None)
    try:
        AsynPool._track_child_process(pool, proc, hub)
        assert added and added[0] == proc._sentinel_poll and added[0] is not None
    finally:
        os.close(read)
        if getattr(proc, "_sentinel_poll", None):
            os.close(proc._sentinel_poll)
