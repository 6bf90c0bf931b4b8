"""The workflow's passes of the kernel's sweep (`LoopKind.sweep_passes`, each called as
`(now, stale, counts)`): a loop_group's completion check and a `workflow:` node waiting for
its children hold no lease the kernel's own passes see."""

from __future__ import annotations

from django.conf import settings

from runs import dispatch
from runs.executor.sweep import lost, take_back
from runs.models import Iteration, NodeRun, Run

from .spec import FINISH_GROUP_TASK
from .subrun import children


def expired_group_checks(now, stale, counts) -> None:
    """A loop_group's completion check whose worker vanished: check again, or fail."""
    for it in Iteration.objects.expired(now).filter(node_run__kind=NodeRun.Kind.LOOP_GROUP):

        def act(run, it=it):
            if it.checks < settings.LOOP_MAX_ATTEMPTS:
                if it.release_check(now):
                    dispatch.send_on_commit(FINISH_GROUP_TASK, it.node_run_id, it.number)
                    counts["requeued"] += 1
                return
            error = f"completion check: {lost(it.checks)}"
            if it.fail(run, error, expired_before=now):
                if not run.is_terminal:
                    NodeRun.objects.get(pk=it.node_run_id).fail(run, error)
                counts["failed"] += 1

        take_back(it, act)


def waiting_parents(now, stale, counts) -> None:
    """A `workflow:` node waits for its children holding no lease, so the kernel's
    `stalled_runs` never sees it: when a child ended a while ago and its parent has not
    counted it (the message from the child was lost), advance the parent."""
    for row in NodeRun.objects.filter(
        kind=NodeRun.Kind.WORKFLOW,
        iteration=0,
        status=NodeRun.Status.RUNNING,
        run__status__in=Run.ACTIVE,
    ):
        ended = [c for c in children(row).values() if c.is_terminal]
        if len(ended) > (row.state or {}).get("seen", 0) and all(
            c.finished_at and c.finished_at < stale for c in ended
        ):
            dispatch.send_now("advance_run", row.run_id)
            counts["advanced"] += 1
