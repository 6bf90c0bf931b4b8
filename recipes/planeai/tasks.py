"""The step machine's Celery task, registered with the kernel (`LoopKind.tasks`) and sent
by name through `runs.dispatch` like all work."""

from celery import shared_task

from runs.tasks import fail_run_on_engine_error

from . import runner


# The name it had when the kernel held it: messages queued before an upgrade still run.
@shared_task(name="runs.tasks.tick_machine")
def tick_machine(run_id: int) -> None:
    """A step machine's trigger: at most ten ticks (runner.tick)."""
    fail_run_on_engine_error(None, run_id, runner.tick, run_id)
