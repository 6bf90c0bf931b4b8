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

from .state import on_fresh_connection

FLUSH_SECONDS = 0.5
# Live output goes out at once, then at most this often: a chatty agent's many small
# chunks cost one Redis round trip per batch, not one each.
PUBLISH_SECONDS = 0.05


class OutputStream:
    def __init__(
        self,
        model,
        pk: int,
        attempt: int,
        run_id: int,
        field: str = "raw_output",
        *,
        lease: bool = True,
        holder: tuple | None = None,
    ):
        """`lease=False` for a row whose work holds its lease elsewhere (a driven loop's
        iterations: their node's `NodeLease`); the flush still proves the row is ours.
        `holder` (model, pk, attempt): the row whose lease covers this work when it is not
        this one (a Python agent call's iteration holds none; its workflow node does): each
        flush renews that lease and writes the output without one."""
        self.model = model
        self.pk = pk
        self.attempt = attempt
        self.run_id = run_id
        self.field = field
        self.lease = lease
        self.holder = holder
        self.parts: list[str] = []
        self.unpublished: list[str] = []
        self.published_length = 0  # the offset open pages place the next chunk at
        self.last_flush = time.monotonic()
        self.last_publish = 0.0

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def __call__(self, chunk: str) -> None:
        if chunk:
            self.parts.append(chunk)
            self.unpublished.append(chunk)
        now = time.monotonic()
        if now - self.last_publish >= PUBLISH_SECONDS:
            self.publish()
        if now - self.last_flush >= FLUSH_SECONDS:
            self.flush()

    def publish(self) -> None:
        """Send the output not yet sent to open pages (call once more when the agent ends)."""
        self.last_publish = time.monotonic()
        if self.unpublished:
            target = self.pk if self.field == "raw_output" else -self.pk
            chunk = "".join(self.unpublished)
            live.publish_output(self.run_id, target, chunk, offset=self.published_length)
            self.published_length += len(chunk)
            self.unpublished.clear()

    def flush(self) -> None:
        self.publish()
        self.last_flush = time.monotonic()
        # A dropped database connection must not cost the agent's work: retry on a new one.
        if not on_fresh_connection(self._save):
            raise Cancelled("the work was cancelled or taken over")

    def keep_after_cancel(self) -> None:
        """The work was cancelled while the agent ran: keep everything it printed on the
        cancelled row (the cancel itself kept only what the last flush had written)."""
        if not self.parts:
            return
        fields = {self.field: self.text}
        if self.field == "raw_output":
            fields["output"] = self.text
        on_fresh_connection(
            lambda: self.model.objects.filter(
                pk=self.pk, status="cancelled", attempts=self.attempt
            ).update(**fields)
        )

    def renew_lease(self) -> bool:
        """Extend the lease only (no output written): safe from another thread."""
        return bool(
            self.model.objects.filter(pk=self.pk, status="running", attempts=self.attempt).update(
                lease_expires_at=timezone.now() + timedelta(seconds=settings.LOOP_LEASE_SECONDS)
            )
        )

    def _save(self) -> bool:
        if self.holder is None and self.lease:
            return renew_lease(self.model, self.pk, self.attempt, **{self.field: self.text})
        saved = self.model.objects.filter(
            pk=self.pk, status="running", attempts=self.attempt
        ).update(**{self.field: self.text})
        return bool(saved) and (self.holder is None or renew_lease(*self.holder))


def lease_end():
    return timezone.now() + timedelta(seconds=settings.LOOP_LEASE_SECONDS)


lease_until = lease_end


def renew_lease(model, pk: int, attempt: int, **fields) -> bool:
    """Extend the lease of the `model` row `pk` while it is still running as `attempt`
    (writing `fields` with it); False when the work was cancelled or taken over. The
    kernel's one lease renewal; a Python workflow's agent calls renew their node's here."""
    return bool(
        model.objects.filter(pk=pk, status="running", attempts=attempt).update(
            **fields, lease_expires_at=lease_end()
        )
    )


class NodeLease:
    """Keeps a claimed node's lease while its work goes on elsewhere (a driven loop's host
    and the pipelines it runs): `renew()` is called on every sign of life, from any thread,
    and writes at most every FLUSH_SECONDS. It raises Cancelled once the node is no longer
    this attempt's (cancelled, or taken back by the sweep)."""

    def __init__(self, node_id: int, attempt: int):
        import threading

        self.node_id = node_id
        self.attempt = attempt
        self.last = 0.0
        self.lost = False
        self._lock = threading.Lock()

    def renew(self) -> None:
        if self.lost:
            raise Cancelled("the work was cancelled or taken over")
        with self._lock:
            if time.monotonic() - self.last < FLUSH_SECONDS:
                return
            self.last = time.monotonic()
        if not on_fresh_connection(self._save):
            self.lost = True
            raise Cancelled("the work was cancelled or taken over")

    def _save(self) -> int:
        from runs.models import NodeRun

        return NodeRun.objects.filter(
            pk=self.node_id, status=NodeRun.Status.RUNNING, attempts=self.attempt
        ).update(lease_expires_at=lease_end())
