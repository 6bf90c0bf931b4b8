"""A worker executes a Python recipe's `workflow` node: the run's pinned source, loaded in a
module of its own, run by the recording host (which replays what earlier attempts did)."""

from __future__ import annotations

import asyncio
import logging
import types
from functools import lru_cache

from django.db import transaction

from loops.python.format import WORKFLOW_NAME
from runs.executor.state import lock_run
from runs.models import NodeRun, Run

from .agents import Runnable
from .recording import RecordingHost, Suspended
from .results import RunCancelled, WorkflowError

log = logging.getLogger(__name__)


class RecipeLoadError(Exception):
    pass


@lru_cache(maxsize=64)
def load_workflow(version_id: int, source: str, source_path: str) -> Runnable:
    """Execute the version's source once per process and take its `workflow`."""
    module = types.ModuleType(f"loop_recipe_v{version_id}")
    module.__file__ = source_path or f"<recipe version {version_id}>"
    try:
        code = compile(source, module.__file__, "exec")
        exec(code, module.__dict__)  # noqa: S102 - a recipe file installed by an administrator
    except Exception as exc:  # noqa: BLE001 - reported on the run, with the line
        raise RecipeLoadError(f"the recipe does not load: {type(exc).__name__}: {exc}") from None
    workflow = module.__dict__.get(WORKFLOW_NAME)
    if not isinstance(workflow, Runnable):
        raise RecipeLoadError(
            "the recipe defines no `workflow` (an Agent, LoopWorkflow, SequentialWorkflow or "
            "ParallelWorkflow) at module level"
        )
    return workflow


def execute(run: Run, row: NodeRun) -> None:
    """Called by the worker that claimed the `workflow` node."""
    version = run.recipe_version
    try:
        workflow = load_workflow(version.pk, version.source, run.recipe.source_path)
    except RecipeLoadError as exc:
        with transaction.atomic():
            locked = lock_run(run.pk)
            row.refresh_from_db()
            if not locked.is_terminal and row.fail(locked, str(exc), attempt=row.attempts):
                locked.fail(str(exc))
        return
    host = RecordingHost(run, row)
    try:
        asyncio.run(workflow.run(run.message, host=host))
    except (Suspended, RunCancelled, WorkflowError):
        return  # paused at a gate, cancelled, or failed: the database already says so
    except Exception:  # the host's close() recorded it on the run
        log.exception("Python workflow of run %s raised", run.pk)
