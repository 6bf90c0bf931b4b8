"""Celery tasks. Each does one step, reads its work from the database, and is safe to
deliver twice: the executor claims work with a conditional UPDATE before acting. That also
makes it safe to run a task again on a new connection when the database dropped ours.

An error nothing in the engine expected (a working directory that cannot be created, a bug)
fails the run at once with the error on its page; retrying would only fail the same way,
minutes later, as "worker lost". A lost database connection is not such an error: the
sweep re-runs that work, and so is an unreachable broker."""

import logging

from celery import shared_task
from django.db import InterfaceError, OperationalError, transaction
from kombu.exceptions import KombuError
from redis.exceptions import RedisError

from console.redact import plain_cause
from runs import dispatch
from runs.executor import handover, scheduler
from runs.executor import sweep as sweeper
from runs.executor.broker import keep_worker_alive_on_broker_loss
from runs.executor.state import lock_run, on_fresh_connection
from runs.models import Iteration, NodeRun

keep_worker_alive_on_broker_loss()
log = logging.getLogger(__name__)
# The database or the broker out of reach: not the run's fault; the sweep re-runs the work.
INFRASTRUCTURE = (OperationalError, InterfaceError, KombuError, RedisError, ConnectionError)


def fail_run_on_engine_error(model, pk: int, work, *args) -> None:
    """Run `work`; on an unexpected error, fail the run that `model` row `pk` belongs to."""
    try:
        on_fresh_connection(work, *args)
    except INFRASTRUCTURE:
        raise
    except Exception as exc:
        run_id = pk if model is None else _run_of(model, pk)
        log.exception("engine error in run %s", run_id)
        if run_id is None:
            raise
        with transaction.atomic():
            run = lock_run(run_id, with_recipe=False)
            if run is not None:
                # The page says what went wrong in plain words; the exception, its message
                # and traceback are in the log line above ("engine error in run N").
                run.fail(f"engine error: {plain_cause(exc)} (details in the worker's log)")


def _run_of(model, pk: int):
    return model.objects.filter(pk=pk).values_list("run_id", flat=True).first()


@shared_task(name="runs.tasks.advance_run")
def advance_run(run_id: int) -> None:
    fail_run_on_engine_error(None, run_id, scheduler.advance_run, run_id)


@shared_task(name="runs.tasks.start_node")
def start_node(node_run_id: int) -> None:
    fail_run_on_engine_error(NodeRun, node_run_id, handover.start_node, node_run_id)


@shared_task(name="runs.tasks.run_iteration")
def run_iteration(iteration_id: int) -> None:
    def run_one(pk: int) -> None:
        fail_run_on_engine_error(Iteration, pk, handover.run_iteration, pk)

    dispatch.chain(iteration_id, run_one)


@shared_task(name="runs.tasks.sweep")
def sweep() -> dict:
    counts = sweeper.sweep()
    # One line per pass at most, and only when the pass found work: a quiet log stays quiet.
    if any(counts.values()):
        log.info("sweep: %s", ", ".join(f"{k} {v}" for k, v in counts.items() if v))
    else:
        log.debug("sweep: nothing to do")
    return counts
