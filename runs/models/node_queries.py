"""NodeRun's queryset: the claim of a delivered node and the bulk ends (runs/models/node.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.db.models import F
from django.utils import timezone

if TYPE_CHECKING:
    from .node import NodeRun


def _node():
    from .node import NodeRun

    return NodeRun


class NodeRunQuerySet(models.QuerySet):
    def claim(self, pk: int) -> bool:
        """Take a queued node for one worker (conditional UPDATE: one delivery wins)."""
        now = timezone.now()
        return bool(
            self.filter(pk=pk, status=_node().Status.PENDING, queued_at__isnull=False).update(
                status=_node().Status.RUNNING,
                started_at=now,
                attempts=F("attempts") + 1,
                lease_expires_at=now + timedelta(seconds=settings.LOOP_LEASE_SECONDS),
            )
        )

    def expired(self, now):
        return self.filter(status=_node().Status.RUNNING, lease_expires_at__lt=now)

    def create_claimed(self, run, node_id: str, kind: str) -> NodeRun:
        """A node this process runs itself (a Python script's `workflow`): created queued
        and taken by the same conditional claim as a delivered one, so it holds a lease
        and no worker is sent it."""
        row = self.create(run=run, node_id=node_id, kind=kind, queued_at=timezone.now())
        if not self.claim(row.pk):
            raise RuntimeError(f"node {node_id} of run {run.pk} was taken before its claim")
        row.refresh_from_db()
        return row

    def close_open(self, status: str) -> int:
        """End every unfinished row here at once, holding no lease (a Python workflow's
        agent rows end with their workflow). No event and no message: the workflow
        node's own transition reports the end."""
        return self.filter(status__in=_node().UNFINISHED).update(
            status=status, finished_at=timezone.now(), lease_expires_at=None
        )
