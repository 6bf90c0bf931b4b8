"""The workflow's Celery task, sent by its name (Celery's registry) through `runs.dispatch`
like all work. Its nodes and loop iterations run on the kernel's `start_node` and
`run_iteration` tasks (runs/tasks.py), which hand them here through WorkflowKind."""

from celery import shared_task

from runs.models import NodeRun
from runs.tasks import fail_run_on_engine_error

from . import group
from .spec import FINISH_GROUP_TASK


@shared_task(name=FINISH_GROUP_TASK)
def finish_group_iteration(group_row_id: int, number: int) -> None:
    """A loop_group's body has ended: check completion, then settle (group.finish_iteration)."""
    fail_run_on_engine_error(NodeRun, group_row_id, group.finish_iteration, group_row_id, number)


# The name the task had while the kernel held it: a message queued under it before an
# upgrade still runs. Nothing sends it any more; drop it once no queue can hold one.
@shared_task(name="runs.tasks.finish_group_iteration")
def finish_group_iteration_under_old_name(group_row_id: int, number: int) -> None:
    finish_group_iteration(group_row_id, number)
