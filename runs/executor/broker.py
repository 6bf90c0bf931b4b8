"""Keep a worker alive when Redis goes away while it runs tasks.

When the broker connection drops, Celery closes it, and closing a Redis channel tries to
put the messages of running tasks back on the queue. With the server gone (and, in kombu
5.7, the connection already torn down) that raises AttributeError, which Celery treats as
unrecoverable: the worker exits instead of reconnecting. Putting those messages back is
not needed here: a running task keeps running, and the sweep re-sends any work whose
message was lost. So the restore is attempted, and given up with a warning if it fails.
"""

from __future__ import annotations

import logging

from kombu.transport import redis as kombu_redis

log = logging.getLogger(__name__)
_restore_unacked = kombu_redis.QoS.restore_unacked


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


def keep_worker_alive_on_broker_loss() -> None:
    kombu_redis.QoS.restore_unacked = _restore_unacked_or_give_up
