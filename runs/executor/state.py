"""State transitions shared by the engine and the services. Each appends a RunEvent.
All of these run inside a transaction that holds the run's row lock."""

from __future__ import annotations

import threading

from django.db import InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from runs.models import Gate, Iteration, NodeRun, Run

_worker = threading.local()


class Handoff:
    """The next iteration a finishing iteration created, for its own task to run next.

    Open only while a `run_iteration` task runs an iteration. The first `run_iteration`
    enqueued in that time is handed over here (once its transaction commits) instead of
    being sent; the task then runs it at once or sends it after all (see loop.run_chain).
    Either way the iteration is a committed pending row, claimed like any other, and the
    sweep re-sends it if the worker dies before claiming it.
    """

    def __init__(self):
        self.taken = False
        self.iteration_id: int | None = None

    def __enter__(self):
        _worker.handoff = self
        return self

    def __exit__(self, *exc):
        _worker.handoff = None

    def take(self, task_name: str, args: tuple) -> bool:
        if self.taken or task_name != "run_iteration":
            return False
        self.taken = True
        transaction.on_commit(lambda: setattr(self, "iteration_id", args[0]))
        return True


def enqueue(task_name: str, *args) -> None:
    """Send a task once the transaction commits, so a worker never sees uncommitted rows."""
    from runs import tasks

    handoff = getattr(_worker, "handoff", None)
    if handoff is not None and handoff.take(task_name, args):
        return
    task = getattr(tasks, task_name)
    transaction.on_commit(lambda: task.delay(*args))


def on_fresh_connection(work, *args, **kwargs):
    """Run `work`; if the database connection was lost (a restarted server, a dropped
    session), run it once more on a new one. Only for work outside a transaction whose
    writes are conditional (claims, finishes): a retry after an unseen commit does nothing."""
    try:
        return work(*args, **kwargs)
    except (OperationalError, InterfaceError):
        if connection.in_atomic_block:
            raise
        connection.close()
        return work(*args, **kwargs)


def lock_run(run_id: int, *, with_recipe: bool = True) -> Run | None:
    runs = Run.objects.select_for_update()
    if with_recipe:  # most callers read the spec; the iteration hot path does not
        runs = runs.select_related("recipe_version", "recipe")
    return runs.filter(pk=run_id).first()


def complete_node(run: Run, node: NodeRun, output: str, structured=None, **data) -> None:
    node.status = NodeRun.Status.COMPLETED
    node.output = output
    node.structured = structured
    node.finished_at = timezone.now()
    node.lease_expires_at = None
    node.save()
    run.append_event("node_completed", node.node_id, iteration=node.iteration or None, **data)
    enqueue("advance_run", run.pk)


def fail_node(run: Run, node: NodeRun, error: str, **data) -> None:
    node.status = NodeRun.Status.FAILED
    node.error = error
    node.finished_at = timezone.now()
    node.lease_expires_at = None
    node.save()
    run.append_event("node_failed", node.node_id, error=error, **data)
    enqueue("advance_run", run.pk)


def skip_node(run: Run, node: NodeRun, reason: str) -> None:
    node.status = NodeRun.Status.SKIPPED
    node.skip_reason = reason
    node.finished_at = timezone.now()
    node.save()
    run.append_event("node_skipped", node.node_id, reason=reason)


def open_gate(run: Run, node: NodeRun, *, kind, message, iteration=None, fired=(), decisions=()):
    node.status = NodeRun.Status.PAUSED
    node.lease_expires_at = None
    node.save()
    gate = Gate.objects.create(
        run=run,
        node_run=node,
        iteration=iteration,
        node_id=node.node_id,
        kind=kind,
        message=message,
        completion_signaled=bool(fired),
        channels=list(fired),
        decisions=list(decisions),
    )
    run.append_event(
        "approval_requested",
        node.node_id,
        gate=gate.pk,
        kind=kind,
        iteration=iteration.number if iteration else None,
        completion_signaled=bool(fired),
        message=message,
    )
    if run.status != Run.Status.PAUSED:
        run.set_status(Run.Status.PAUSED)
    return gate


def stop_all_work(run: Run, reason: str) -> None:
    """Cancel every unfinished piece of a run. Running agents notice at their next flush."""
    now = timezone.now()
    Gate.objects.filter(run=run, status=Gate.Status.PENDING).update(
        status=Gate.Status.CANCELLED, decided_at=now, comment=reason, surface=Gate.Surface.ENGINE
    )
    Iteration.objects.filter(
        run=run, status__in=[Iteration.Status.PENDING, Iteration.Status.RUNNING]
    ).update(status=Iteration.Status.CANCELLED, finished_at=now, error=reason)
    NodeRun.objects.filter(
        run=run,
        status__in=[NodeRun.Status.PENDING, NodeRun.Status.RUNNING, NodeRun.Status.PAUSED],
    ).update(status=NodeRun.Status.CANCELLED, finished_at=now, error=reason)


def next_iteration(run: Run, node: NodeRun, number: int, *, feedback: str = "", after_gate=False):
    node.iteration_count = number
    node.status = NodeRun.Status.RUNNING
    node.save()
    it = Iteration.objects.create(
        run=run,
        node_run=node,
        node_id=node.node_id,
        generation=node.generation,
        number=number,
        feedback=feedback,
        after_gate=after_gate,
        status=Iteration.Status.RUNNING if node.kind == "loop_group" else Iteration.Status.PENDING,
        queued_at=timezone.now(),
        started_at=timezone.now() if node.kind == "loop_group" else None,
    )
    run.append_event("iteration_queued", node.node_id, iteration=number, feedback=bool(feedback))
    if node.kind == "loop_group":
        enqueue("advance_run", run.pk)
    else:
        enqueue("run_iteration", it.pk)
    return it


def max_iterations_error(node_id: str, loop_spec) -> str:
    declared = [
        f"{name}: {value}"
        for name, value in (
            ("until", loop_spec.until),
            ("until_bash", loop_spec.until_bash),
            ("until_field", getattr(loop_spec, "until_field", None)),
        )
        if value
    ]
    return (
        f"'{node_id}' reached max_iterations ({loop_spec.max_iterations}) without meeting a "
        f"completion condition ({'; '.join(declared)})"
    )
