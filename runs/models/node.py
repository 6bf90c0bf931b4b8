from django.db import models
from django.utils import timezone

from runs import dispatch

from .node_queries import NodeRunQuerySet

# A node the run's budget holds (runs.budget) waits, paused, keeping in its `state` what it
# will do on resume: {"number", "feedback", "after_gate"} or {"action": "node"}.
HOLD = "budget_hold"


class NodeRun(models.Model):
    """One node of a run. Top-level nodes have iteration 0; a loop_group's body nodes get
    one row per group iteration, with the namespaced id `group.node`.

    Its status changes only through the transitions below (complete, fail, skip, pause,
    start_iteration, suspend, unpause, wake, requeue, reopen, reset_for_resume, and the
    budget's hold: hold_for_budget, release_hold, requeue_held); each is a conditional
    UPDATE of the columns it names, says whether it moved, appends the run's event and sends
    what comes next on commit. Callers hold the run's row lock."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        PAUSED = "paused"
        COMPLETED = "completed"
        FAILED = "failed"
        SKIPPED = "skipped"
        CANCELLED = "cancelled"

    class Kind(models.TextChoices):
        """The kernel's own node kinds, and `agent` (a call a kind runs outside a loop
        node). A loop kind adds its own (`LoopKind.nodes` in runs/kinds.py), so `kind` is
        not limited to these and has no choices."""

        BASH = "bash"
        SCRIPT = "script"
        PROMPT = "prompt"
        COMMAND = "command"
        APPROVAL = "approval"
        CANCEL = "cancel"
        WORKFLOW = "workflow"
        LOOP = "loop"
        LOOP_GROUP = "loop_group"
        AGENT = "agent"

    # Steps a worker runs once.
    STEPS = (Kind.BASH, Kind.PROMPT, Kind.COMMAND, Kind.SCRIPT)
    # Steps whose one agent call is an iteration of their own row, one per attempt: not a
    # loop's iterations (the budget's `iterations` limit and the convergence charts count
    # loops').
    SINGLE_CALLS = (Kind.PROMPT, Kind.COMMAND)
    TERMINAL = {Status.COMPLETED, Status.FAILED, Status.SKIPPED, Status.CANCELLED}
    UNFINISHED = [Status.PENDING, Status.RUNNING, Status.PAUSED]
    WAKES = "wakes"  # in `state`: claims that followed a decision, not a lost worker
    # In `state`: lost workers no longer counted, because the unit made durable progress
    # between their claim and their loss (`progressed_since_claim`, `requeue`).
    SPARED = "spared"

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="nodes")
    node_id = models.CharField(max_length=300)
    kind = models.CharField(max_length=20)
    iteration = models.PositiveIntegerField(default=0, help_text="Enclosing group's iteration.")
    generation = models.PositiveIntegerField(default=0, help_text="Bumped by a failure resume.")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    output = models.TextField(blank=True)
    # An output longer than LOOP_MAX_OUTPUT_BYTES: the file (under LOOP_DATA_DIR) that holds
    # all of it, and its size; the text fields above keep its end (runs/outputs.py).
    output_file = models.CharField(max_length=300, blank=True)
    output_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    structured = models.JSONField(null=True, blank=True)
    # What a bash or script step wrote to stderr, apart from its output (which is stdout):
    # its end within LOOP_MAX_OUTPUT_BYTES (runs/outputs.py: StderrTail).
    stderr = models.TextField(blank=True)
    error = models.TextField(blank=True)
    skip_reason = models.CharField(max_length=300, blank=True)
    iteration_count = models.PositiveIntegerField(default=0)
    max_iterations = models.PositiveIntegerField(null=True, blank=True)
    # Engine memory that must survive a gate or a crash: the threaded session id, the
    # feedback for the next iteration, the snapshot of the prompt template, ...
    state = models.JSONField(default=dict, blank=True)
    # Lease for claim-by-conditional-UPDATE work (bash/prompt steps run by one task).
    attempts = models.PositiveIntegerField(default=0)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    carried_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="carried_copies"
    )

    objects = NodeRunQuerySet.as_manager()

    class Meta:
        ordering = ["run", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "node_id", "iteration", "generation"], name="node_run_unique"
            )
        ]
        indexes = [models.Index(fields=["status", "lease_expires_at"], name="node_lease")]

    def __str__(self):
        suffix = f" #{self.iteration}" if self.iteration else ""
        return f"{self.node_id}{suffix} [{self.status}]"

    @property
    def output_download_url(self) -> str:
        """The run page's link to the whole output (runs/views_output.py)."""
        from django.urls import reverse

        return reverse("node_output", args=[self.run_id, self.pk])

    @property
    def output_truncated(self) -> bool:
        """The output passed LOOP_MAX_OUTPUT_BYTES: `output` is its end, the file all of it."""
        return bool(self.output_file)

    @property
    def workers_lost(self) -> int:
        """Executions of this node whose worker was lost with no progress made since, the
        one whose lease just ran out included: its claims, less those that followed a
        gate's decision (`wake`) and those spared by progress (`requeue`). The sweep's
        attempt limit (LOOP_MAX_ATTEMPTS) counts these: lost progress, not lost workers."""
        return self.executions_lost - (self.state or {}).get(self.SPARED, 0)

    @property
    def executions_lost(self) -> int:
        """Every execution of this node whose worker was lost, those spared by progress
        included: the claims that did not follow a decision (`wake`)."""
        return self.attempts - (self.state or {}).get(self.WAKES, 0)

    def progressed_since_claim(self, rows_outside_graph=()) -> bool:
        """Durable progress since this row's last claim (`started_at`): an agent call
        completed since, of this row or of the rows its kind runs under this row's lease
        (`LoopKind.rows_outside_graph`: a driven host's pipeline steps, a Python
        workflow's agent calls). Such a call is kept and not run again."""
        from django.db.models import Q

        from .iteration import Iteration

        if self.started_at is None:
            return False
        return Iteration.objects.filter(
            Q(node_run=self) | Q(node_run__kind__in=list(rows_outside_graph)),
            run_id=self.run_id,
            status=Iteration.Status.COMPLETED,
            finished_at__gte=self.started_at,
        ).exists()

    @property
    def is_single_call(self) -> bool:
        return self.kind in self.SINGLE_CALLS

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    @property
    def short_id(self) -> str:
        return self.node_id.rsplit(".", 1)[-1]

    @property
    def duration(self):
        if not self.started_at:
            return None
        return (self.finished_at or timezone.now()) - self.started_at

    # --- transitions ---------------------------------------------------------------------

    def _move(self, status, *, allowed, attempt=None, expired_before=None, **columns) -> bool:
        """Write `status` and `columns`, and nothing else of this row, only if its status
        is one of `allowed` (and, when given, it is still attempt `attempt` / its lease
        expired before then): one conditional UPDATE. Whether it moved; the instance
        follows only when it did."""
        fence = {"pk": self.pk, "status__in": allowed}
        if attempt is not None:
            fence["attempts"] = attempt
        if expired_before is not None:
            fence["lease_expires_at__lt"] = expired_before
        values = {"status": status, **columns}
        if not type(self).objects.filter(**fence).update(**values):
            return False
        for name, value in values.items():
            setattr(self, name, value)
        return True

    def queue(self, run) -> None:
        """Ready to start: log it and send `start_node`."""
        self.queued_at = timezone.now()
        type(self).objects.filter(pk=self.pk).update(queued_at=self.queued_at)
        run.append_event(
            "node_queued", self.node_id, kind=self.kind, iteration=self.iteration or None
        )
        dispatch.send_on_commit("start_node", self.pk)

    def complete(
        self, run, output: str, structured=None, *, attempt=None, columns=None, **data
    ) -> bool:
        """Done with `output`. `columns`: more of this row's columns the caller wants
        written with the move (and only if it moves), e.g. the output's file."""
        if not self._move(
            self.Status.COMPLETED,
            allowed=self.UNFINISHED,
            attempt=attempt,
            **(columns or {}),
            output=output,
            structured=structured,
            finished_at=timezone.now(),
            lease_expires_at=None,
        ):
            return False
        run.append_event("node_completed", self.node_id, iteration=self.iteration or None, **data)
        dispatch.send_on_commit("advance_run", run.pk)
        return True

    def fail(
        self, run, error: str, *, attempt=None, expired_before=None, columns=None, **data
    ) -> bool:
        """Failed with `error`; `columns` as for `complete`."""
        if not self._move(
            self.Status.FAILED,
            allowed=self.UNFINISHED,
            attempt=attempt,
            expired_before=expired_before,
            **(columns or {}),
            error=error,
            finished_at=timezone.now(),
            lease_expires_at=None,
        ):
            return False
        run.append_event("node_failed", self.node_id, error=error, **data)
        dispatch.send_on_commit("advance_run", run.pk)
        return True

    def end_open_calls(self, run, error: str) -> None:
        """Fail this row's iterations still running under its own lease (a prompt step's
        agent call holds none of its own): the row ended without them."""
        from .iteration import Iteration

        for it in self.iterations.filter(
            status=Iteration.Status.RUNNING, lease_expires_at__isnull=True
        ):
            it.fail(run, error)

    def skip(self, run, reason: str) -> bool:
        if not self._move(
            self.Status.SKIPPED,
            allowed=[self.Status.PENDING],
            skip_reason=reason,
            finished_at=timezone.now(),
        ):
            return False
        run.append_event("node_skipped", self.node_id, reason=reason)
        return True

    def pause(
        self,
        run,
        *,
        kind,
        message,
        iteration=None,
        fired=(),
        decisions=(),
        deadline=None,
        label="",
        columns=None,
        approvals=1,
    ):
        """Stop at a gate: the node waits, holding no lease and no message; returns the gate,
        or None (nothing written) when the node had already ended. `deadline` (a
        GateDeadline, stored on the gate: its escalation and timeout_decision too) has the
        sweep escalate, remind, reject, fail or decide when it passes; `label` names
        the gate when it is not the node's id (a step machine's step); `columns` as for
        `complete`; `approvals`: how many distinct people must approve."""
        from runs import review, signals

        from .gate import Gate

        if not self._move(
            self.Status.PAUSED, allowed=self.UNFINISHED, **(columns or {}), lease_expires_at=None
        ):
            return None
        gate = Gate.objects.create(
            run=run,
            node_run=self,
            iteration=iteration,
            node_id=label or self.node_id,
            kind=kind,
            message=message,
            completion_signaled=bool(fired),
            channels=list(fired),
            decisions=list(decisions),
            approvals_needed=approvals or 1,
            **(deadline.gate_fields(timezone.now()) if deadline else {}),
        )
        review.record(run, gate)
        run.append_event(
            "approval_requested",
            label or self.node_id,
            gate=gate.pk,
            kind=kind,
            iteration=iteration.number if iteration else None,
            completion_signaled=bool(fired),
            message=message,
            deadline=gate.deadline_at.isoformat() if gate.deadline_at else None,
            on_timeout=gate.on_timeout or None,
            decisions=gate.offered_decisions,
            approvals_needed=gate.approvals_needed,
            digest=gate.digest,
        )
        run.update_status()
        signals.gate_opened.send(Gate, run=run, gate=gate)
        return gate

    def start_iteration(
        self,
        run,
        number: int,
        *,
        feedback: str = "",
        after_gate=False,
        here: bool = False,
        checked: bool = False,
        columns=None,
    ):
        """Create iteration `number` and send it to a worker (a loop_group's iteration is
        its body, run by the scheduler) — unless the run's budget is spent (runs.budget),
        which stops the run here, between iterations, and returns None. `here`: the caller
        claims and runs it itself (a Python workflow's agent call): it is created pending
        and neither logged as queued nor sent. `checked`: the caller made the budget check
        itself, on the row that waits when it says stop (a step machine, on its machine).
        None, with nothing written, also when the node had already ended. `columns` as for
        `complete` (written whether it goes on or waits for its budget)."""
        from runs import budget

        from .iteration import Iteration

        hold = {"number": number, "feedback": feedback, "after_gate": after_gate}
        # A Python call (`here`) is checked by its host, on the workflow node it belongs to.
        if not (here or checked) and not budget.allows_next_iteration(run, self, hold, columns):
            return None  # stopped by the run's budget; resuming starts this iteration
        if not self._move(
            self.Status.RUNNING, allowed=self.UNFINISHED, **(columns or {}), iteration_count=number
        ):
            return None
        it = Iteration.objects.create(
            run=run,
            node_run=self,
            node_id=self.node_id,
            generation=self.generation,
            number=number,
            feedback=feedback,
            after_gate=after_gate,
            queued_at=timezone.now(),
        )
        if not here:
            self._send_iteration(run, it)
        return it

    def _send_iteration(self, run, it) -> None:
        """Log iteration `it` as queued and hand it to whoever runs it next."""
        run.append_event(
            "iteration_queued", self.node_id, iteration=it.number, feedback=bool(it.feedback)
        )
        if self.kind == self.Kind.LOOP_GROUP:
            # Its body is its work: started here, the scheduler runs the body.
            it.start(run, "", None, leased=False)
            dispatch.send_on_commit("advance_run", run.pk)
        else:
            dispatch.send_on_commit("run_iteration", it.pk)

    def suspend(self, run, *, attempt: int) -> bool:
        """The attempt holding this node stops at a gate without waiting (a worker running
        a Python workflow): paused, no lease; the decision wakes it."""
        if not self._move(
            self.Status.PAUSED,
            allowed=[self.Status.RUNNING],
            attempt=attempt,
            lease_expires_at=None,
        ):
            return False
        run.append_event("node_paused", self.node_id, gate=True)
        return True

    def unpause(self, run=None) -> bool:
        """A decision moves a node paused at its gate back to running (its own code, not
        the engine, goes on: a Python agent row, a step machine's `human.wait`)."""
        return self._move(self.Status.RUNNING, allowed=[self.Status.PAUSED])

    def wake(self, run) -> bool:
        """A suspended node goes back to work: pending, queued, sent (`start_node`). Its
        next claim is counted as a wake-up, not as a lost worker (`workers_lost`)."""
        woken = {**(self.state or {}), self.WAKES: (self.state or {}).get(self.WAKES, 0) + 1}
        if not self._move(
            self.Status.PENDING, allowed=[self.Status.PAUSED], lease_expires_at=None, state=woken
        ):
            return False
        self.queue(run)
        return True

    def requeue(self, run, now, *, progressed: bool = False) -> bool:
        """Give an expired step back to pending and send it again. `progressed`: it made
        durable progress since its claim, so its count of lost workers starts afresh."""
        columns = {}
        if progressed:
            # Read under the row's lock: a write of the state meanwhile (a fork's) is kept.
            rows = type(self).objects.select_for_update().filter(pk=self.pk)
            self.state = rows.values_list("state", flat=True).get()
            spared = (self.state or {}).get(self.SPARED, 0) + self.workers_lost
            columns["state"] = {**(self.state or {}), self.SPARED: spared}
        if not self._move(
            self.Status.PENDING,
            allowed=[self.Status.RUNNING],
            attempt=self.attempts,
            expired_before=now,
            lease_expires_at=None,
            queued_at=now,
            **columns,
        ):
            return False
        run.append_event("node_requeued", self.node_id, attempts=self.attempts)
        dispatch.send_on_commit("start_node", self.pk)
        return True

    def resend_if_stale(self, stale_before, now) -> bool:
        """A queued node nobody claimed (its message lost): send it again."""
        if (
            type(self)
            .objects.filter(pk=self.pk, status=self.Status.PENDING, queued_at__lt=stale_before)
            .update(queued_at=now)
        ):
            dispatch.send_now("start_node", self.pk)
            return True
        return False

    def reopen(self) -> bool:
        """A row that ended with an earlier piece of work is at work again (a driven
        pipeline's agent row, after a resume)."""
        return self._move(self.Status.RUNNING, allowed=list(self.TERMINAL), finished_at=None)

    def reset_for_resume(self) -> bool:
        """Back to pending, as new, under the next generation (a resume runs it again)."""
        return self._move(
            self.Status.PENDING,
            allowed=[s for s in self.Status.values],
            generation=self.generation + 1,
            queued_at=None,
            started_at=None,
            finished_at=None,
            lease_expires_at=None,
            output="",
            stderr="",
            error="",
            skip_reason="",
            structured=None,
            state={},
            iteration_count=0,
            attempts=0,
        )

    # --- the budget's hold ---------------------------------------------------------------

    def hold_for_budget(self, hold: dict, columns=None) -> bool:
        """The run's budget stopped it before its next step: it waits, paused with no lease,
        keeping `hold` (what to do on resume, runs.budget) in its state."""
        columns = dict(columns or {})
        columns["state"] = {**columns.get("state", self.state), HOLD: hold}
        return self._move(
            self.Status.PAUSED, allowed=self.UNFINISHED, **columns, lease_expires_at=None
        )

    def release_hold(self) -> dict:
        """Take back what `hold_for_budget` kept (the caller resumes it): its hold."""
        state = dict(self.state)
        hold = dict(state.pop(HOLD))
        type(self).objects.filter(pk=self.pk).update(state=state)
        self.state = state
        return hold

    def requeue_held(self, run) -> bool:
        """A node the budget held before it started goes back to its worker (queued)."""
        if not self._move(self.Status.PENDING, allowed=self.UNFINISHED, lease_expires_at=None):
            return False
        self.queue(run)
        return True
