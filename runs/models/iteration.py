from datetime import timedelta

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import F
from django.utils import timezone

from runs import dispatch

from . import agent_call


class IterationQuerySet(models.QuerySet):
    def claim(
        self,
        it: "Iteration",
        prompt: str,
        session_id: str | None,
        *,
        leased: bool = True,
        take_over: bool = False,
    ) -> bool:
        """Take a pending iteration for one worker, recording the prompt it is sent.

        One conditional UPDATE: only a row still pending changes, so of two deliveries (or
        a delivery and a cancel) exactly one wins; RETURNING gives the attempt it got.
        `leased=False`: the iteration holds no lease of its own (a Python agent call,
        covered by its workflow node's). `take_over`: also take the row while it is still
        running as attempt `it.attempts` (the execution that ran it died; the caller holds
        the claim that proves it)."""
        now = timezone.now()
        ops = connection.ops
        lease = now + timedelta(seconds=settings.LOOP_LEASE_SECONDS) if leased else None
        fence = "status = %s"
        params = [Iteration.Status.PENDING]
        if take_over:
            fence = "(status = %s OR (status = %s AND attempts = %s))"
            params += [Iteration.Status.RUNNING, it.attempts]
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {Iteration._meta.db_table} SET status = %s, attempts = attempts + 1, "
                "started_at = %s, finished_at = NULL, lease_expires_at = %s, prompt = %s, "
                "session_id = %s, raw_output = '', output = '', error = '', output_file = '', "
                "output_bytes = NULL, waiting_for = '', waiting_ahead = NULL "
                f"WHERE id = %s AND {fence} RETURNING attempts",
                [
                    Iteration.Status.RUNNING,
                    ops.adapt_datetimefield_value(now),
                    ops.adapt_datetimefield_value(lease) if lease else None,
                    prompt,
                    session_id or "",
                    it.pk,
                    *params,
                ],
            )
            claimed = cursor.fetchone()
        if claimed is None:
            return False
        it.attempts, it.status, it.started_at = claimed[0], Iteration.Status.RUNNING, now
        it.prompt, it.session_id, it.lease_expires_at = prompt, session_id or "", lease
        it.raw_output = it.output = it.error = it.output_file = ""
        it.output_bytes = it.finished_at = None
        return True

    def claim_logged(self, it: "Iteration", prompt: str, session_id: str | None) -> bool:
        """`claim` under the run's lock with its `iteration_started` event: one statement
        on PostgreSQL (runs/models/batched.py), a transaction elsewhere. False, with
        nothing written, when the run finished or the iteration is not pending."""
        from . import batched

        if batched.in_use():
            lease = timezone.now() + timedelta(seconds=settings.LOOP_LEASE_SECONDS)
            return batched.claim_logged(it, prompt, session_id, lease)
        from .run import Run

        with transaction.atomic():
            run = Run.objects.select_for_update().filter(pk=it.run_id).first()
            return run is not None and not run.is_terminal and it.start(run, prompt, session_id)

    def waiting_for_a_provider(self):
        """Pending iterations waiting for their provider's limits (`waiting_for_provider`),
        oldest first: what the run page, the inbox and the API say they wait for."""
        return (
            self.filter(status=Iteration.Status.PENDING)
            .exclude(waiting_for="")
            .only(
                "run_id",
                "node_id",
                "number",
                "status",
                "waiting_for",
                "waiting_ahead",
                "waiting_since",
            )
            .order_by("id")
        )

    def expired(self, now):
        """Running iterations whose worker stopped renewing the lease."""
        return self.filter(status=Iteration.Status.RUNNING, lease_expires_at__lt=now)

    def stale(self, stale_before):
        """Pending iterations nobody claimed for a while (their message may be lost)."""
        return self.filter(status=Iteration.Status.PENDING, queued_at__lt=stale_before)


class Iteration(models.Model):
    """One pass of a loop (one agent session) or of a loop_group's body.

    Status changes only through `claim`, `finish`, `requeue` and the run's
    `stop_all_work`, each fenced by status and attempt number. Every kind runs an agent
    call through the one lifecycle here: `start` (claim, `iteration_started`), then
    `complete` or `fail` (finish, `iteration_completed` / `iteration_failed`), each event
    with the one payload of runs/models/agent_call.py."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        COMPLETED = "completed"
        TIMED_OUT = "timed_out"
        FAILED = "failed"
        CANCELLED = "cancelled"

    # Ended, one way or another (what /metrics counts as finished).
    FINISHED = {Status.COMPLETED, Status.TIMED_OUT, Status.FAILED, Status.CANCELLED}
    # Ended by `complete`: the agent answered (or went silent past its idle timeout).
    ANSWERED = {Status.COMPLETED, Status.TIMED_OUT}

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="iterations")
    node_run = models.ForeignKey(
        "runs.NodeRun", on_delete=models.CASCADE, related_name="iterations"
    )
    node_id = models.CharField(max_length=300)
    generation = models.PositiveIntegerField(default=0)
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    prompt = models.TextField(blank=True, help_text="The prompt exactly as sent.")
    feedback = models.TextField(blank=True, help_text="Gate feedback that started this iteration.")
    after_gate = models.BooleanField(default=False, help_text="First iteration after a gate.")
    raw_output = models.TextField(blank=True)
    output = models.TextField(blank=True, help_text="Cleaned output (signal tags stripped).")
    # An output longer than LOOP_MAX_OUTPUT_BYTES: the file (under LOOP_DATA_DIR) that holds
    # all of it, and its size; the text fields above keep its end (runs/outputs.py).
    output_file = models.CharField(max_length=300, blank=True)
    output_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    structured = models.JSONField(null=True, blank=True)
    channels = models.JSONField(default=list, blank=True, help_text="Completion channels fired.")
    error = models.TextField(blank=True)
    session_id = models.CharField(max_length=200, blank=True)
    tokens_in = models.PositiveIntegerField(null=True, blank=True)
    tokens_out = models.PositiveIntegerField(null=True, blank=True)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    # A scored loop's number for this iteration (a recipe's `score:`), and where it came
    # from: {"source": "field" | "bash" | "judge" | ..., "reason": ..., the judge's usage}.
    score = models.FloatField(null=True, blank=True)
    score_detail = models.JSONField(null=True, blank=True)
    # A pending iteration waiting for its provider's limits (runs/providers/limits.py):
    # which provider, how many wait ahead of it, since when (its ceiling counts from here).
    waiting_for = models.CharField(max_length=100, blank=True)
    waiting_ahead = models.PositiveIntegerField(null=True, blank=True)
    waiting_since = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    # A fork's copy of an earlier run's iteration: shown as history, never executed.
    carried_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="carried_copies"
    )

    objects = IterationQuerySet.as_manager()

    class Meta:
        ordering = ["run", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["node_run", "generation", "number"], name="iteration_number_unique"
            )
        ]
        indexes = [
            models.Index(fields=["run", "node_id", "number"], name="iteration_by_node"),
            models.Index(fields=["run", "-id"], name="iteration_recent"),
            models.Index(fields=["status", "lease_expires_at"], name="iteration_lease"),
        ]

    def __str__(self):
        return f"{self.node_id} iteration {self.number} [{self.status}]"

    @property
    def output_download_url(self) -> str:
        """The run page's link to the whole output (runs/views_output.py)."""
        from django.urls import reverse

        return reverse("iteration_output", args=[self.run_id, self.pk])

    @property
    def output_truncated(self) -> bool:
        """The output passed LOOP_MAX_OUTPUT_BYTES: `raw_output` and `output` are its end,
        the file all of it."""
        return bool(self.output_file)

    @property
    def can_fork(self) -> bool:
        """Does its card offer "Fork from here"? Its node's kind decides (runs.fork)."""
        from runs.fork import forkable

        return forkable(self.node_run)

    def elapsed_ms(self) -> int | None:
        if not self.started_at:
            return None
        return int((timezone.now() - self.started_at).total_seconds() * 1000)

    def finish(self, status: str, *, expired_before=None, **fields) -> bool:
        """End the attempt this instance claimed, logging nothing (`complete` and `fail`
        log). False (and nothing written) when the row was cancelled, or taken back by
        the sweep, meanwhile."""
        fields.update(status=status, finished_at=timezone.now(), lease_expires_at=None)
        fields.setdefault("duration_ms", self.elapsed_ms())
        fence = {"pk": self.pk, "status": self.Status.RUNNING, "attempts": self.attempts}
        if expired_before is not None:
            fence["lease_expires_at__lt"] = expired_before
        if not Iteration.objects.filter(**fence).update(**fields):
            return False
        for name, value in fields.items():  # keep the instance in step without a read
            setattr(self, name, value)
        return True

    # --- the agent call's lifecycle: each transition logs its event (the caller holds the
    # run's lock; False, and nothing logged, when the attempt lost its claim) -------------

    def start(self, run, prompt: str, session_id: str | None = None, **claim) -> bool:
        """Claim this pending iteration (`IterationQuerySet.claim`, with its `leased` and
        `take_over`) and log `iteration_started`."""
        if not Iteration.objects.claim(self, prompt, session_id, **claim):
            return False
        run.append_event(
            "iteration_started", self.node_id, **agent_call.started_data(self.number, self.attempts)
        )
        return True

    def complete(self, run, outcome=None, *, channels=(), **fields) -> bool:
        """End this attempt as answered and log `iteration_completed`. `outcome`: what the
        provider returned (runs.executor.agent.AgentOutcome): the row keeps its answer,
        usage and session (`agent_call.answer_fields`), ends `timed_out` when the agent
        went silent, and the call's conversation and tool use are kept (`record_call`).
        `fields`: what else the row keeps (a loop_group's iteration: its body's answer)."""
        timed_out = bool(outcome is not None and outcome.result.timed_out)
        if outcome is not None:
            fields = {**agent_call.answer_fields(outcome), **fields}
        status = self.Status.TIMED_OUT if timed_out else self.Status.COMPLETED
        if not self.finish(status, channels=list(channels), **fields):
            return False
        if outcome is not None:
            agent_call.record_call(run, self.node_id, self.number, outcome.result, outcome.provider)
        data = agent_call.completed_data(
            self.number, channels=channels, timed_out=timed_out, duration_ms=self.duration_ms
        )
        run.append_event("iteration_completed", self.node_id, **data)
        return True

    def fail(self, run, error: str, *, timed_out: bool = False, **fields) -> bool:
        """End this attempt as failed and log `iteration_failed` (the caller fails what
        depends on it). `timed_out`: the agent went silent past its idle timeout."""
        if not self.finish(self.Status.FAILED, error=error, **fields):
            return False
        data = agent_call.failed_data(
            self.number, error=error, timed_out=timed_out, duration_ms=self.duration_ms
        )
        run.append_event("iteration_failed", self.node_id, **data)
        return True

    def finished_as(self, statuses) -> bool:
        """This attempt already ended with one of `statuses`: a retry on a new connection
        finds the work of a try whose commit it did not see (`on_fresh_connection`)."""
        return Iteration.objects.filter(
            pk=self.pk, status__in=statuses, attempts=self.attempts
        ).exists()

    def complete_then_next(self, outcome, *, channels=()):
        """The plain "go on" of a loop in one statement on PostgreSQL: `complete` this
        attempt with the provider's `outcome` (logging `iteration_completed`), write its
        answer (output, structured, session_id) on the node and queue the next iteration,
        whose id is returned and sent (None: the run finished or the claim was lost;
        nothing was written). Only for a node that goes on, with nothing to keep besides
        the answer (no conversation, tool use or worktree diff); the caller checked."""
        from . import batched

        timed_out = outcome.result.timed_out
        status = self.Status.TIMED_OUT if timed_out else self.Status.COMPLETED
        fields = {**agent_call.answer_fields(outcome), "channels": list(channels)}
        next_id = batched.finish_then_next(self, status, fields, timed_out=timed_out)
        if next_id is not None:
            dispatch.send_on_commit("run_iteration", next_id)
        return next_id

    # --- waiting for the provider (runs/executor/provider_queue.py) --------------------

    def waiting_for_provider(self, provider: str, ahead: int) -> bool:
        """Say what this pending iteration waits for (its provider's limits); True when it
        starts waiting now. Nothing is written once it was claimed or ended."""
        now = timezone.now()
        started = not self.waiting_for
        fields = {
            "waiting_for": provider,
            "waiting_ahead": ahead,
            "waiting_since": self.waiting_since or now,
            "queued_at": now,
        }
        if not Iteration.objects.filter(pk=self.pk, status=self.Status.PENDING).update(**fields):
            return False
        for name, value in fields.items():
            setattr(self, name, value)
        return started

    def give_back_attempt(self, provider: str) -> bool:
        """A busy provider answered this attempt: the iteration is pending again, waiting
        for it, and the attempt does not count (fenced like `finish`; nothing it printed
        is kept). False when the attempt lost its claim meanwhile."""
        now = timezone.now()
        fields = {
            "status": self.Status.PENDING,
            "started_at": None,
            "lease_expires_at": None,
            "raw_output": "",
            "output": "",
            "output_file": "",
            "output_bytes": None,
            "waiting_for": provider,
            "waiting_ahead": 0,
            "waiting_since": self.waiting_since or now,
            "queued_at": now,
        }
        fence = {"pk": self.pk, "status": self.Status.RUNNING, "attempts": self.attempts}
        if not Iteration.objects.filter(**fence).update(attempts=F("attempts") - 1, **fields):
            return False
        for name, value in fields.items():
            setattr(self, name, value)
        self.attempts -= 1
        return True

    def provider_waits_in_a_row(self) -> int:
        """How many busy answers this iteration had (its backoff grows with them)."""
        return self.run.events.filter(
            kind="provider_busy", step=self.node_id, data__iteration=self.number
        ).count()

    @property
    def waiting_words(self) -> str:
        """ "waiting for provider X (3 ahead)", as the run page, the inbox and the API say
        it; "" when it is not waiting."""
        if not self.waiting_for or self.status != self.Status.PENDING:
            return ""
        return f"waiting for provider {self.waiting_for} ({self.waiting_ahead or 0} ahead)"

    def cancel_if_pending(self, reason: str) -> bool:
        """Cancel an iteration no worker has claimed yet (its run ended before the turn
        started). False, and nothing written, when a worker claimed it or it ended."""
        fields = {"status": self.Status.CANCELLED, "finished_at": timezone.now(), "error": reason}
        if not Iteration.objects.filter(pk=self.pk, status=self.Status.PENDING).update(**fields):
            return False
        for name, value in fields.items():
            setattr(self, name, value)
        return True

    def requeue(self, run, now) -> bool:
        """Give an iteration whose worker vanished back to pending, and send it again."""
        if not Iteration.objects.filter(
            pk=self.pk,
            status=self.Status.RUNNING,
            attempts=self.attempts,
            lease_expires_at__lt=now,
        ).update(status=self.Status.PENDING, lease_expires_at=None, queued_at=now):
            return False
        run.append_event(
            "iteration_requeued", self.node_id, iteration=self.number, attempts=self.attempts
        )
        dispatch.send_on_commit("run_iteration", self.pk)
        return True

    def reopen(self) -> bool:
        """A failed attempt of a step's one call goes back to pending, for the step's next
        attempt to claim (`start`, which counts it)."""
        if not Iteration.objects.filter(pk=self.pk, status=self.Status.FAILED).update(
            status=self.Status.PENDING, finished_at=None
        ):
            return False
        self.status, self.finished_at = self.Status.PENDING, None
        return True

    def resend_if_stale(self, stale_before, now) -> bool:
        if Iteration.objects.filter(
            pk=self.pk, status=self.Status.PENDING, queued_at__lt=stale_before
        ).update(queued_at=now):
            dispatch.send_now("run_iteration", self.pk)
            return True
        return False

    # --- a loop_group's completion check: claimed through the lease of its iteration ----

    @property
    def checks(self) -> int:
        """The completion checks claimed so far: the attempts after the group's start."""
        return max(self.attempts - 1, 0)

    def claim_check(self) -> bool:
        """Take the group iteration's completion check (a duplicate finds it taken)."""
        lease = timezone.now() + timedelta(seconds=settings.LOOP_LEASE_SECONDS)
        claimed = Iteration.objects.filter(
            pk=self.pk,
            status=self.Status.RUNNING,
            lease_expires_at__isnull=True,
            attempts=self.attempts,
        ).update(lease_expires_at=lease, attempts=self.attempts + 1)
        if claimed:
            self.attempts += 1
            self.lease_expires_at = lease
        return bool(claimed)

    def release_check(self, now) -> bool:
        """The check's worker vanished: let the check be claimed again (the caller sends it)."""
        return bool(
            Iteration.objects.filter(
                pk=self.pk, status=self.Status.RUNNING, lease_expires_at__lt=now
            ).update(lease_expires_at=None)
        )
