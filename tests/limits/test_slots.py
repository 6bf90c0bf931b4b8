"""The slots themselves (runs/providers/limits.py), against the suite's Redis: first come
first served, a gone waiter leaves the queue, a duplicate delivery holds nothing twice,
windows a minute long, and a given-back slot wakes the first waiters."""

from __future__ import annotations

import time
import uuid

import pytest

from runs.providers import limits


class Provider:
    def __init__(self, **given):
        self.name = "slotted"
        self.limits = limits.Limits(**given)
        self.limit_account = f"name:test-{uuid.uuid4().hex}"


def busy(provider, caller) -> limits.Busy:
    with pytest.raises(limits.Busy) as waiting:
        limits.take(provider, caller)
    return waiting.value


def test_first_come_first_served_and_a_given_back_slot_wakes_the_first_waiter():
    provider = Provider(max_concurrent=1)
    holder = limits.take(provider, "iteration:1")
    assert busy(provider, "iteration:2").ahead == 0
    assert busy(provider, "iteration:3").ahead == 1
    assert busy(provider, "iteration:3").ahead == 1  # asking again keeps its place
    assert holder.give_back(tokens=10) == ["iteration:2"]
    assert holder.give_back() == []  # once
    assert busy(provider, "iteration:3").ahead == 1  # the slot is iteration:2's turn
    assert limits.take(provider, "iteration:2") is not None
    assert busy(provider, "iteration:3").ahead == 0


def test_another_delivery_of_a_call_that_holds_its_slot_holds_nothing():
    provider = Provider(max_concurrent=2)
    first = limits.take(provider, "iteration:7")
    with pytest.raises(limits.AlreadyHeld):
        limits.take(provider, "iteration:7")
    first.give_back()
    assert limits.take(provider, "iteration:7") is not None


def test_a_waiter_that_does_not_ask_again_leaves_the_queue():
    provider = Provider(max_concurrent=1)
    holder = limits.take(provider, "iteration:1")
    busy(provider, "iteration:2")
    assert busy(provider, "iteration:3").ahead == 1
    # iteration:2's run was cancelled: it never asks again. Its time runs out...
    seen = limits._keys(provider.limit_account)[2]
    limits._client().zadd(seen, {"iteration:2": int(time.time() * 1000) - 1}, xx=True)
    holder.give_back()
    # ... and the one behind it is first now.
    assert limits.take(provider, "iteration:3") is not None


def test_requests_a_minute_say_how_long_to_wait():
    provider = Provider(requests_per_minute=2)
    limits.take(provider, "call:a")
    limits.take(provider, "call:b")
    waiting = busy(provider, "call:c")
    assert waiting.ahead == 0 and 59 <= waiting.wait_seconds <= 60 * 1.25 + 1


def test_a_provider_without_limits_takes_no_slot():
    assert limits.take(Provider(), "call:x") is None
