"""Stream an agent's output into its row while it runs, and keep the lease alive.

Each flush is a conditional UPDATE that also proves we still own the work: if the row was
cancelled, or the sweep took it back after our lease expired, the update touches nothing
and we stop the agent.
"""

from __future__ import annotations

import time
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from runs import live
from runs.providers.base import Cancelled

FLUSH_SECONDS = 0.5


class OutputStream:
    def __init__(self, model, pk: int, attempt: int, run_id: int, field: str = "raw_output"):
        self.model = model
        self.pk = pk
        self.attempt = attempt
        self.run_id = run_id
        self.field = field
        self.parts: list[str] = []
        self.last_flush = time.monotonic()

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def __call__(self, chunk: str) -> None:
        if chunk:
            self.parts.append(chunk)
            live.publish_output(
                self.run_id, self.pk if self.field == "raw_output" else -self.pk, chunk
            )
        if time.monotonic() - self.last_flush >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        self.last_flush = time.monotonic()
        owned = self.model.objects.filter(
            pk=self.pk, status="running", attempts=self.attempt
        ).update(
            **{self.field: self.text},
            lease_expires_at=timezone.now() + timedelta(seconds=settings.LOOP_LEASE_SECONDS),
        )
        if not owned:
            raise Cancelled("the work was cancelled or taken over")
