"""Keep a worker alive when Redis goes away while it runs tasks.

When the broker connection drops, Celery closes it, and closing a Redis channel tries to
put the messages of running tasks back on the queue. With the server gone (and, in kombu
5.7, the connection already torn down) that raises AttributeError, which Celery treats as
unrecoverable: the worker exits instead of reconnecting. Putting those messages back is
not needed here: a running task keeps running, and the sweep re-sends any work whose
message was lost. So the restore is attempted, and given up with a warning if it fails.

The same holds for the ack (or reject) of a task that finishes after the connection it
came on was closed: Celery acks on that old channel, whose connection is gone (kombu
reaches `self.connection.client` on None: AttributeError 'client'), and the worker would
exit seconds after Redis came back. The message's delivery died with its channel; the
ack is given up with a warning and the worker goes on.

And a pool process that died while the broker was away (killed, out of memory) has been
untracked but is still in the pool when the consumer reconnects; Celery then registers its
closed sentinel (None) with the event loop and exits ("file descriptor is None"). It is
tracked afresh instead, so its exit is seen again and the pool replaces it.
"""

from __future__ import annotations

import logging

from celery.concurrency import asynpool
from kombu.transport import redis as kombu_redis

log = logging.getLogger(__name__)
_restore_unacked = kombu_redis.QoS.restore_unacked
_ack = kombu_redis.QoS.ack
_reject = kombu_redis.QoS.reject
_track_child_process = asynpool.AsynPool._track_child_process


def _restore_unacked_or_give_up(self, client=None):
    try:
        return _restore_unacked(self, client)
    except (AttributeError, *kombu_redis.Transport.connection_errors) as exc:
        log.warning(
            "broker unreachable: %d running task message(s) not put back (%r); "
            "the sweep re-sends lost work",
            len(self._delivered),
            exc,
        )
        self._delivered.clear()


def _ack_or_give_up(self, delivery_tag):
    try:
        return _ack(self, delivery_tag)
    except (AttributeError, *kombu_redis.Transport.connection_errors) as exc:
        _gave_up(self, "ack", delivery_tag, exc)


def _reject_or_give_up(self, delivery_tag, requeue=False):
    try:
        return _reject(self, delivery_tag, requeue=requeue)
    except (AttributeError, *kombu_redis.Transport.connection_errors) as exc:
        _gave_up(self, "reject", delivery_tag, exc)


def _gave_up(qos, what: str, delivery_tag, exc) -> None:
    log.warning(
        "broker connection closed: the %s of a finished task's message is given up (%r); "
        "the worker goes on",
        what,
        exc,
    )
    qos._delivered.pop(delivery_tag, None)


def _track_child_process_afresh(self, proc, hub):
    if getattr(proc, "_sentinel_poll", False) is None:  # exited, untracked meanwhile
        del proc._sentinel_poll
        if getattr(proc, "_popen", None) is None:
            return  # already reaped: the pool has nothing of it left to watch
        log.warning("a pool process exited while the broker was away; the pool replaces it")
    return _track_child_process(self, proc, hub)


def keep_worker_alive_on_broker_loss() -> None:
    kombu_redis.QoS.restore_unacked = _restore_unacked_or_give_up
    kombu_redis.QoS.ack = _ack_or_give_up
    kombu_redis.QoS.reject = _reject_or_give_up
    asynpool.AsynPool._track_child_process = _track_child_process_afresh
