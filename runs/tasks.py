"""Celery tasks. Each does one step, reads its work from the database, and is safe to
deliver twice: the executor claims work with a conditional UPDATE before acting."""

from celery import shared_task

from runs.executor import group, loop, scheduler, steps
from runs.executor import sweep as sweeper


@shared_task(name="runs.tasks.advance_run")
def advance_run(run_id: int) -> None:
    scheduler.advance_run(run_id)


@shared_task(name="runs.tasks.start_node")
def start_node(node_run_id: int) -> None:
    steps.start_node(node_run_id)


@shared_task(name="runs.tasks.run_iteration")
def run_iteration(iteration_id: int) -> None:
    loop.run_iteration(iteration_id)


@shared_task(name="runs.tasks.finish_group_iteration")
def finish_group_iteration(group_row_id: int, number: int) -> None:
    group.finish_group_iteration(group_row_id, number)


@shared_task(name="runs.tasks.sweep")
def sweep() -> dict:
    return sweeper.sweep()
