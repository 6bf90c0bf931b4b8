"""What the tests of `run wait`, GET /api/runs/{id}/wait and the MCP tool `wait_for_run`
share: a run held before its first message, so a wait can start before the run moves, and
a way to know that the wait listens (its subscription to the run's live channel)."""

from __future__ import annotations

import threading
from unittest import mock

import redis
from django.conf import settings

from runs import dispatch, live, services
from runs.actor import Actor
from tests.conftest import wait_for


class HeldRun:
    """A run started with its messages held back (no worker acts on it: it stays
    pending); `release()` sends them, and the worker takes it from there."""

    def __init__(self, recipe, operator, message: str = "the sea"):
        with mock.patch("runs.dispatch.deliver") as held:
            self.run = services.start_run(
                recipe, actor=Actor.operator(operator, "console"), message=message
            )
        self.messages = list(held.call_args_list)
        assert self.messages, "start_run sent nothing to hold"

    def release(self) -> None:
        for message in self.messages:
            dispatch.deliver(*message.args, **message.kwargs)


def listeners(run_id: int) -> int:
    """How many waits are subscribed to the run's live channel."""
    client = redis.Redis.from_url(settings.LIVE_REDIS_URL)
    try:
        return dict(client.pubsub_numsub(live.channel(run_id))).get(
            live.channel(run_id).encode(), 0
        )
    finally:
        client.close()


def wait_for_listeners(run_id: int, count: int = 1) -> None:
    wait_for(
        lambda: listeners(run_id) >= count,
        message=f"{count} wait(s) to listen on run {run_id}'s channel",
    )


class InThread:
    """Call `work()` on a thread of its own (a wait that blocks); `result()` joins it and
    returns what it returned, or raises what it raised."""

    def __init__(self, work):
        self.outcome: dict = {}

        def go():
            from django.db import connection

            try:
                self.outcome["value"] = work()
            except BaseException as exc:  # noqa: BLE001 - raised again by result()
                self.outcome["error"] = exc
            finally:
                connection.close()

        self.thread = threading.Thread(target=go, name="a-wait", daemon=True)
        self.thread.start()

    def result(self, timeout: float = 180):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the wait did not return"
        if "error" in self.outcome:
            raise self.outcome["error"]
        return self.outcome["value"]
