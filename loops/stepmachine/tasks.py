"""The step machine's Celery task, sent by its name (Celery's registry) through
`runs.dispatch` like all work."""

from celery import shared_task

from runs.tasks import fail_run_on_engine_error

from . import runner
from .spec import TICK_TASK


@shared_task(name=TICK_TASK)
def tick_machine(run_id: int) -> None:
    """A step machine's trigger: at most ten ticks (runner.tick)."""
    fail_run_on_engine_error(None, run_id, runner.tick, run_id)


# The name the task had while the kernel held it (runs/tasks.py): a message queued under it
# before an upgrade still runs. Nothing sends it any more; drop it once no queue can hold one.
@shared_task(name="runs.tasks.tick_machine")
def tick_machine_under_old_name(run_id: int) -> None:
    tick_machine(run_id)
