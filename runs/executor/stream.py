"""Stream an agent's output into its row while it runs, and keep the lease alive.

Each flush is a conditional UPDATE that also proves we still own the work: if the row was
cancelled, or the sweep took it back after our lease expired, the update touches nothing
and we stop the agent. Every kind's output goes through here, so here it is capped
(LOOP_MAX_OUTPUT_BYTES, runs/outputs.py): the row keeps the end, a file all of it.
"""

from __future__ import annotations

import time
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from runs import live
from runs.outputs import Capture, StderrTail, size_words, tail
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
        flush renews that lease and writes the output without one.

        The output is kept by a `Capture` (runs/outputs.py): its end within
        LOOP_MAX_OUTPUT_BYTES in memory and in the row, all of it in a file once it passes
        that. Open pages get it live up to the cap, then a line saying it was truncated."""
        self.model = model
        self.pk = pk
        self.attempt = attempt
        self.run_id = run_id
        self.field = field
        self.lease = lease
        self.holder = holder
        kind = "iteration" if field == "raw_output" else "node"
        self.capture = Capture(run_id, f"{kind}-{pk}-{attempt}")
        # A step's stderr (bash, script: `on_stderr`), kept apart from its output.
        self.errors = StderrTail()
        self.unpublished: list[str] = []
        self.published_length = 0  # the offset open pages place the next chunk at
        self.live_bytes = 0  # what went out live, against the cap
        self.live_closed = False  # the live view said "truncated" and sends no more
        self.announced = False  # the `output_truncated` event is logged
        self.last_flush = time.monotonic()
        self.last_publish = 0.0

    @property
    def text(self) -> str:
        """What the row keeps of the output so far (its end, within the cap)."""
        return self.capture.text

    def fields(self) -> dict:
        """The row's `output_file` and `output_bytes` for what was printed so far."""
        return self.capture.fields()

    @property
    def stderr(self) -> str:
        """What the step wrote to stderr so far (its end, within the cap)."""
        return self.errors.text

    def on_stderr(self, chunk: str) -> None:
        """A step's stderr: kept on its row (`NodeRun.stderr`), never in its output."""
        self.errors.add(chunk)

    def __call__(self, chunk: str) -> None:
        if chunk:
            self.capture.add(chunk)
            self._go_live(chunk)
        now = time.monotonic()
        if now - self.last_publish >= PUBLISH_SECONDS:
            self.publish()
        if (self.capture.truncated and not self.announced) or (
            now - self.last_flush >= FLUSH_SECONDS
        ):
            self.flush()

    def reset(self) -> None:
        """A step's next attempt starts its output afresh (open pages see it after the
        earlier attempt's, unless that one already passed the cap and closed the live view)."""
        self.capture.reset()
        self.errors.reset()
        self.announced = False

    def keep(self, outcome):
        """An agent call's outcome (runs.executor.agent.AgentOutcome) as its row keeps it:
        its raw output recorded (the full file past the cap), `raw` and `text` cut to their
        ends, the provider's copy of the text let go. Returns the outcome, with `fields`
        (output_file, output_bytes) for the row."""
        outcome.raw = self.capture.keep(outcome.raw)
        outcome.text = outcome.raw if outcome.text is outcome.raw else tail(outcome.text)
        outcome.result.text = outcome.raw
        outcome.fields = self.fields()
        self._announce_if_cut()
        return outcome

    def keep_text(self, text: str) -> str:
        """A step's final output (bash, script) as its row keeps it (see `keep`)."""
        kept = self.capture.keep(text)
        self._announce_if_cut()
        return kept

    def _go_live(self, chunk: str) -> None:
        """Queue `chunk` for open pages, up to the cap; past it, one line says so."""
        if self.live_closed:
            return
        room = self.capture.limit - self.live_bytes
        size = len(chunk) if chunk.isascii() else len(chunk.encode("utf-8", "replace"))
        if size <= room:
            self.unpublished.append(chunk)
            self.live_bytes += size
            return
        head = chunk.encode("utf-8", "replace")[:room].decode("utf-8", "ignore")
        self.unpublished.append(head + truncation_line(self.capture.limit))
        self.live_closed = True

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
        self._announce_if_cut()

    def close(self) -> None:
        """The output ended without a final answer to keep (a gate command's log)."""
        self.capture.close()

    def keep_after_cancel(self) -> None:
        """The work was cancelled while the agent ran: keep everything it printed on the
        cancelled row (the cancel itself kept only what the last flush had written)."""
        self.capture.close()
        if not self.capture.total:
            return
        fields = self._row_fields()
        if self.field == "raw_output":
            fields["output"] = self.text
        on_fresh_connection(
            lambda: self.model.objects.filter(
                pk=self.pk, status="cancelled", attempts=self.attempt
            ).update(**fields)
        )

    def renew_lease(self) -> bool:
        """Extend the lease that covers this work (no output written): its `holder`'s when
        it has one (a Python agent call's iteration holds none of its own), else its row's.
        Safe from another thread."""
        if self.holder is not None:
            return renew_lease(*self.holder)
        return renew_lease(self.model, self.pk, self.attempt)

    def _row_fields(self) -> dict:
        fields = {self.field: self.text, **self.fields()}
        if self.errors.total:
            fields["stderr"] = self.stderr
        return fields

    def _save(self) -> bool:
        fields = self._row_fields()
        if self.holder is None and self.lease:
            return renew_lease(self.model, self.pk, self.attempt, **fields)
        saved = self.model.objects.filter(
            pk=self.pk, status="running", attempts=self.attempt
        ).update(**fields)
        return bool(saved) and (self.holder is None or renew_lease(*self.holder))

    def _announce_if_cut(self) -> None:
        """Once the output passed the cap: the run's log says so (`output_truncated`), which
        also redraws the open pages' card of this row with the truncation and its link."""
        if self.announced or not self.capture.truncated:
            return
        self.announced = True
        on_fresh_connection(self._log_truncation)

    def _log_truncation(self) -> None:
        from runs.models import Run

        numbered = "number" if self.field == "raw_output" else "iteration"
        found = self.model.objects.filter(pk=self.pk).values_list("node_id", numbered).first()
        if found is None:
            return
        node_id, number = found
        with transaction.atomic():  # the run's row alone: no lock order with the work's row
            Run(pk=self.run_id).append_event(
                "output_truncated",
                node_id,
                iteration=number or None,
                target=live.output_target(self.pk if self.field == "raw_output" else -self.pk),
                at_bytes=self.capture.limit,
            )


def truncation_line(limit: int) -> str:
    """What the live view shows, once, where it stops: the output passed the cap."""
    return (
        f"\n[output truncated at {size_words(limit)}: the live view stops here; the run keeps "
        f"the last {size_words(limit)} and the whole output as a file to download]\n"
    )


def lease_end():
    return timezone.now() + timedelta(seconds=settings.LOOP_LEASE_SECONDS)


def renew_lease(model, pk: int, attempt: int, **fields) -> bool:
    """Extend the lease of the `model` row `pk` while it is still running as `attempt`
    (writing `fields` with it); False when the work was cancelled or taken over. Every
    `OutputStream` renews here (a Python workflow's agent calls renew their node's); a
    driven loop's host node keeps its lease through `NodeLease` below."""
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
