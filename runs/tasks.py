"""Celery tasks. Each does one step, reads its work from the database, and is safe to
deliver twice: the executor claims work with a conditional UPDATE before acting. That also
makes it safe to run a task again on a new connection when the database dropped ours."""

from celery import shared_task

from runs.executor import group, loop, scheduler, steps
from runs.executor import sweep as sweeper
from runs.executor.broker import keep_worker_alive_on_broker_loss
from runs.executor.state import on_fresh_connection

keep_worker_alive_on_broker_loss()


@shared_task(name="runs.tasks.advance_run")
def advance_run(run_id: int) -> None:
    on_fresh_connection(scheduler.advance_run, run_id)


@shared_task(name="runs.tasks.start_node")
def start_node(node_run_id: int) -> None:
    on_fresh_connection(steps.start_node, node_run_id)


@shared_task(name="runs.tasks.run_iteration")
def run_iteration(iteration_id: int) -> None:
    loop.run_chain(iteration_id)


@shared_task(name="runs.tasks.finish_group_iteration")
def finish_group_iteration(group_row_id: int, number: int) -> None:
    on_fresh_connection(group.finish_group_iteration, group_row_id, number)


@shared_task(name="runs.tasks.sweep")
def sweep() -> dict:
    return sweeper.sweep()
