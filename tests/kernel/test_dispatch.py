"""runs/dispatch.py: every message goes out on commit through `deliver`; the in-task fast
path (`chain` / `NextInChain`) hands a run's next iteration to the running task only once its
row is committed, falls back to the broker after CHAIN_SECONDS or when an iteration
raises, and hands nothing over from a rolled-back transaction."""

from __future__ import annotations

import pytest
from django.db import transaction

from runs import dispatch

pytestmark = pytest.mark.django_db(transaction=True)


def test_send_on_commit_sends_after_the_commit_and_never_after_a_rollback(broker):
    with transaction.atomic():
        dispatch.send_on_commit("advance_run", 1)
        assert broker.sent == []  # not before the rows it names are committed
    assert broker.sent == [("advance_run", (1,))]
    with pytest.raises(RuntimeError), transaction.atomic():
        dispatch.send_on_commit("advance_run", 2)
        raise RuntimeError("rolled back")
    assert broker.sent == [("advance_run", (1,))]


def test_the_next_iteration_is_handed_over_on_commit_not_sent(broker):
    ran = []

    def run_one(pk):
        ran.append(pk)
        if pk < 3:
            with transaction.atomic():
                dispatch.send_on_commit("run_iteration", pk + 1)
                # Handed over only once committed: inside, nothing is taken yet.
                assert ran and broker.sent == []

    assert dispatch.chain(1, run_one) == 3
    assert ran == [1, 2, 3] and broker.sent == []


def test_only_the_first_run_iteration_is_handed_over_and_other_tasks_are_sent(broker):
    def run_one(pk):
        if pk == 1:
            with transaction.atomic():
                dispatch.send_on_commit("advance_run", 7)
                dispatch.send_on_commit("run_iteration", 2)
                dispatch.send_on_commit("run_iteration", 3)

    assert dispatch.chain(1, run_one) == 2
    assert broker.sent == [("advance_run", (7,)), ("run_iteration", (3,))]


def test_a_rolled_back_transaction_hands_nothing_over(broker):
    ran = []

    def run_one(pk):
        ran.append(pk)
        try:
            with transaction.atomic():
                dispatch.send_on_commit("run_iteration", pk + 1)
                raise ValueError("the settlement failed")
        except ValueError:
            pass

    assert dispatch.chain(1, run_one) == 1
    assert ran == [1] and broker.sent == []


def test_after_chain_seconds_the_next_iteration_goes_through_the_broker(broker, monkeypatch):
    monkeypatch.setattr(dispatch, "CHAIN_SECONDS", 0)
    ran = []

    def run_one(pk):
        ran.append(pk)
        with transaction.atomic():
            dispatch.send_on_commit("run_iteration", pk + 1)

    assert dispatch.chain(1, run_one) == 1
    assert ran == [1] and broker.sent == [("run_iteration", (2,))]


def test_an_iteration_that_raises_re_sends_what_it_had_handed_over(broker):
    def run_one(pk):
        with transaction.atomic():
            dispatch.send_on_commit("run_iteration", pk + 1)
        raise RuntimeError("after the commit")

    with pytest.raises(RuntimeError):
        dispatch.chain(1, run_one)
    assert broker.sent == [("run_iteration", (2,))]


def test_outside_a_chain_run_iteration_is_sent_like_any_task(broker):
    with transaction.atomic():
        dispatch.send_on_commit("run_iteration", 5)
    dispatch.send_now("start_node", 6)
    assert broker.sent == [("run_iteration", (5,)), ("start_node", (6,))]


def test_the_fast_path_s_send_with_the_broker_down_is_left_to_the_sweep(monkeypatch, caplog):
    """The next iteration's row is committed: the broker being out of reach when the chain
    hands it back (time is up, or the iteration raised) fails neither the task nor hides the
    iteration's own error; the sweep re-sends it (issue 42)."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    def broker_down(task_name, *args, countdown=None):
        raise RedisConnectionError("Connection refused")

    monkeypatch.setattr(dispatch, "deliver", broker_down)
    monkeypatch.setattr(dispatch, "CHAIN_SECONDS", 0)

    def queues_the_next(pk):
        with transaction.atomic():
            dispatch.send_on_commit("run_iteration", pk + 1)

    assert dispatch.chain(1, queues_the_next) == 1
    assert "run_iteration(2,) not sent" in caplog.text

    def queues_then_raises(pk):
        queues_the_next(pk)
        raise RuntimeError("the iteration's own error")

    with pytest.raises(RuntimeError, match="own error"):
        dispatch.chain(1, queues_then_raises)
