"""Re-enqueue work whose worker vanished, and work whose message the broker lost.

A running iteration or step renews its lease every half second while it streams. When a
lease has expired, its worker is gone (killed, machine lost): the work goes back to pending
and is sent again, until its recorded attempt count reaches LOOP_MAX_ATTEMPTS, when it
fails. Pending work that nobody claimed for a while is sent again (claims make duplicates
harmless). A gate holds no lease and no message, so a gate may wait for weeks.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from runs.models import Iteration, NodeRun, Run

from .state import enqueue, fail_node, lock_run


def sweep(now=None) -> dict:
    now = now or timezone.now()
    counts = {"requeued": 0, "failed": 0, "resent": 0, "advanced": 0}
    limit = settings.LOOP_MAX_ATTEMPTS
    for it in Iteration.objects.filter(
        status=Iteration.Status.RUNNING, lease_expires_at__lt=now
    ).select_related("node_run"):
        with transaction.atomic():
            run = lock_run(it.run_id)
            if it.node_run.kind == "loop_group":
                # The completion check of a group iteration was lost: let it be claimed again.
                if Iteration.objects.filter(pk=it.pk, lease_expires_at__lt=now).update(
                    lease_expires_at=None
                ):
                    enqueue("finish_group_iteration", it.node_run_id, it.number)
                    counts["requeued"] += 1
                continue
            if it.attempts >= limit:
                error = f"worker lost {it.attempts} times (attempt limit {limit})"
                if (
                    Iteration.objects.filter(
                        pk=it.pk, status=Iteration.Status.RUNNING, lease_expires_at__lt=now
                    ).update(
                        status=Iteration.Status.FAILED,
                        error=error,
                        finished_at=now,
                        lease_expires_at=None,
                    )
                    and not run.is_terminal
                ):
                    row = NodeRun.objects.get(pk=it.node_run_id)
                    fail_node(run, row, f"iteration {it.number} failed: {error}")
                    counts["failed"] += 1
            elif Iteration.objects.filter(
                pk=it.pk, status=Iteration.Status.RUNNING, lease_expires_at__lt=now
            ).update(status=Iteration.Status.PENDING, lease_expires_at=None, queued_at=now):
                run.append_event(
                    "iteration_requeued", it.node_id, iteration=it.number, attempts=it.attempts
                )
                enqueue("run_iteration", it.pk)
                counts["requeued"] += 1
    for row in NodeRun.objects.filter(status=NodeRun.Status.RUNNING, lease_expires_at__lt=now):
        with transaction.atomic():
            run = lock_run(row.run_id)
            if row.attempts >= limit:
                if NodeRun.objects.filter(
                    pk=row.pk, status=NodeRun.Status.RUNNING, lease_expires_at__lt=now
                ).update(lease_expires_at=None):
                    row.refresh_from_db()
                    fail_node(run, row, f"worker lost {row.attempts} times (attempt limit {limit})")
                    counts["failed"] += 1
            elif NodeRun.objects.filter(
                pk=row.pk, status=NodeRun.Status.RUNNING, lease_expires_at__lt=now
            ).update(status=NodeRun.Status.PENDING, lease_expires_at=None, queued_at=now):
                run.append_event("node_requeued", row.node_id, attempts=row.attempts)
                enqueue("start_node", row.pk)
                counts["requeued"] += 1
    stale = now - timedelta(seconds=settings.LOOP_STALE_PENDING_SECONDS)
    for it in Iteration.objects.filter(status=Iteration.Status.PENDING, queued_at__lt=stale):
        if Iteration.objects.filter(
            pk=it.pk, status=Iteration.Status.PENDING, queued_at__lt=stale
        ).update(queued_at=now):
            enqueue_now("run_iteration", it.pk)
            counts["resent"] += 1
    for row in NodeRun.objects.filter(status=NodeRun.Status.PENDING, queued_at__lt=stale):
        if NodeRun.objects.filter(
            pk=row.pk, status=NodeRun.Status.PENDING, queued_at__lt=stale
        ).update(queued_at=now):
            enqueue_now("start_node", row.pk)
            counts["resent"] += 1
    for run_id in Run.objects.filter(
        status__in=[Run.Status.PENDING, Run.Status.RUNNING], updated_at__lt=stale
    ).values_list("pk", flat=True):
        enqueue_now("advance_run", run_id)
        counts["advanced"] += 1
    return counts


def enqueue_now(task_name: str, *args) -> None:
    from runs import tasks

    getattr(tasks, task_name).delay(*args)
