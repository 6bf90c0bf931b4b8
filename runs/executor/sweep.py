"""Re-enqueue work whose worker vanished, and work whose message the broker lost.

A running iteration or step renews its lease every half second while it streams. When a
lease has expired, its worker is gone (killed, machine lost): the work goes back to pending
and is sent again, until its recorded attempt count reaches LOOP_MAX_ATTEMPTS, when it
fails. Pending work that nobody claimed for a while is sent again (claims make duplicates
harmless). A gate holds no lease and no message, so a gate may wait for weeks.

Each pass is named for what it repairs; every one goes through `take_back`, which locks the
run and acts only if the row is still in the state the pass found it in.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from runs import dispatch
from runs.models import Iteration, NodeRun, Run

from .state import lock_run

log = logging.getLogger(__name__)


def sweep(now=None) -> dict:
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.LOOP_STALE_PENDING_SECONDS)
    counts: Counter = Counter()
    expired_iterations(now, counts)
    expired_group_checks(now, counts)
    expired_steps(now, counts)
    lost_messages(stale, now, counts)
    stalled_runs(stale, counts)
    result = {key: counts[key] for key in ("requeued", "failed", "resent", "advanced")}
    if any(result.values()):
        log.info("sweep: %s", ", ".join(f"{k} {v}" for k, v in result.items() if v))
    return result


def take_back(row, act) -> None:
    """Lock the row's run and let `act(run)` move the row if it still can (each transition
    is conditional on the status, attempt and lease the pass saw)."""
    with transaction.atomic():
        run = lock_run(row.run_id)
        if run is not None:
            act(run)


def _lost(attempts: int) -> str:
    return f"worker lost {attempts} times (attempt limit {settings.LOOP_MAX_ATTEMPTS})"


def expired_iterations(now, counts: Counter) -> None:
    """Agent iterations whose worker stopped renewing the lease: run again, or fail."""
    for it in Iteration.objects.expired(now).exclude(node_run__kind="loop_group"):

        def act(run, it=it):
            if it.attempts < settings.LOOP_MAX_ATTEMPTS:
                counts["requeued"] += it.requeue(run, now)
                return
            error = _lost(it.attempts)
            if it.finish(Iteration.Status.FAILED, expired_before=now, error=error):
                if not run.is_terminal:
                    row = NodeRun.objects.get(pk=it.node_run_id)
                    row.fail(run, f"iteration {it.number} failed: {error}")
                counts["failed"] += 1

        take_back(it, act)


def expired_group_checks(now, counts: Counter) -> None:
    """A loop_group's completion check whose worker vanished: check again, or fail."""
    for it in Iteration.objects.expired(now).filter(node_run__kind="loop_group"):

        def act(run, it=it):
            if it.attempts < settings.LOOP_MAX_ATTEMPTS:
                counts["requeued"] += it.release_check(now)
                return
            error = f"completion check: {_lost(it.attempts)}"
            if it.finish(Iteration.Status.FAILED, expired_before=now, error=error):
                if not run.is_terminal:
                    NodeRun.objects.get(pk=it.node_run_id).fail(run, error)
                counts["failed"] += 1

        take_back(it, act)


def expired_steps(now, counts: Counter) -> None:
    """Steps (bash, prompt, a node's start) whose worker vanished: run again, or fail."""
    for row in NodeRun.objects.expired(now):

        def act(run, row=row):
            if row.attempts < settings.LOOP_MAX_ATTEMPTS:
                counts["requeued"] += row.requeue(run, now)
            elif row.fail(run, _lost(row.attempts), attempt=row.attempts, expired_before=now):
                counts["failed"] += 1

        take_back(row, act)


def lost_messages(stale, now, counts: Counter) -> None:
    """Pending work nobody claimed for a while: its message may be lost, send it again."""
    for it in Iteration.objects.stale(stale):
        counts["resent"] += it.resend_if_stale(stale, now)
    for row in NodeRun.objects.filter(status=NodeRun.Status.PENDING, queued_at__lt=stale):
        counts["resent"] += row.resend_if_stale(stale, now)


def stalled_runs(stale, counts: Counter) -> None:
    """A run not updated for a while with nothing running, pending or paused: its
    `advance_run` was lost. A healthy long run always has something in one of those: an
    unfinished node (a loop_group's own row aside: it stays running between its
    iterations), or an iteration pending or running under a lease (a group's completion
    check holds its iteration's lease while it runs)."""
    nodes = NodeRun.objects.filter(run=OuterRef("pk"), status__in=NodeRun.UNFINISHED)
    iterations = Iteration.objects.filter(run=OuterRef("pk")).filter(
        Q(status=Iteration.Status.PENDING)
        | Q(status=Iteration.Status.RUNNING, lease_expires_at__isnull=False)
    )
    for run_id in (
        Run.objects.filter(
            status__in=[Run.Status.PENDING, Run.Status.RUNNING], updated_at__lt=stale
        )
        .exclude(Exists(nodes.exclude(kind="loop_group")))
        .exclude(Exists(iterations))
        .values_list("pk", flat=True)
    ):
        dispatch.send_now("advance_run", run_id)
        counts["advanced"] += 1
