"""Driven loops and their iterations, kept for inspection (`/api/loops`, `/loops`).

A Loop is opened by its host's `core_start_loop` and closed once (completed, exhausted or
failed). Each transition is a conditional UPDATE made under the run's row lock and appends
its crumb to the run's log, with exactly the fields the crumb promises:

    loop:start            {loopId, pipeline, maxIterations}
    loop:iteration:start  {loopId, iteration}
    loop:iteration:end    {loopId, iteration, output}
    loop:end              {loopId, status, iterations, result?}

Each host tool call that changed a loop is a HostCall, written in the transaction of that
change: the record a turn resumed after a lost worker replays (loops/driven/driver.py).
"""

from __future__ import annotations

from django.db import models, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone


class Loop(models.Model):
    class Status(models.TextChoices):
        OPEN = "open"
        COMPLETED = "completed"
        EXHAUSTED = "exhausted"
        FAILED = "failed"

    ENDED = (Status.COMPLETED, Status.EXHAUSTED, Status.FAILED)

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="loops")
    host_iteration = models.ForeignKey(
        "runs.Iteration",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The host's turn that drove the loop.",
    )
    agent = models.CharField(max_length=300, help_text="The host agent's id.")
    pipeline = models.JSONField(default=list)
    input = models.JSONField(null=True, blank=True, help_text="The first iteration's input.")
    max_iterations = models.PositiveIntegerField()
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.OPEN)
    iteration_count = models.PositiveIntegerField(default=0)
    last_output = models.JSONField(
        null=True, blank=True, help_text="What the host saw last (after on_iteration_end)."
    )
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["run", "id"], name="loop_by_run"),
            models.Index(fields=["status", "-id"], name="loop_status_recent"),
            models.Index(fields=["agent", "-id"], name="loop_agent_recent"),
        ]
        constraints = [
            # A host has at most one open loop: a second start is refused, and two racing
            # starts cannot both win.
            models.UniqueConstraint(
                fields=["host_iteration"],
                condition=Q(status="open"),
                name="loop_one_open_per_host_turn",
            )
        ]

    def __str__(self):
        return f"Loop {self.pk} ({self.status})"

    def get_absolute_url(self):
        return reverse("loop_detail", args=[self.pk])

    @property
    def is_open(self) -> bool:
        return self.status == self.Status.OPEN

    @property
    def outcome(self) -> str:
        """How a loop that ended ended, in the words its card and its page use."""
        if self.status == self.Status.COMPLETED:
            return "the host was satisfied"
        if self.status == self.Status.EXHAUSTED:
            return "the cap was reached"
        return "" if self.is_open else "it failed"

    @property
    def can_iterate(self) -> bool:
        return self.is_open and self.iteration_count < self.max_iterations

    @property
    def duration(self):
        return (self.finished_at or timezone.now()) - self.started_at

    # --- transitions (the caller holds the run's row lock) ---------------------------------

    @classmethod
    def open(cls, run, *, host_iteration, agent: str, pipeline: list, input, max_iterations: int):
        loop = cls.objects.create(
            run=run,
            host_iteration=host_iteration,
            agent=agent,
            pipeline=list(pipeline),
            input=input,
            max_iterations=max_iterations,
        )
        run.append_event(
            "loop:start",
            agent,
            loopId=loop.pk,
            pipeline=list(pipeline),
            maxIterations=max_iterations,
        )
        return loop

    def begin_iteration(self, run, *, input, feedback: str = "") -> LoopIteration:
        number = self.iteration_count + 1
        moved = Loop.objects.filter(
            pk=self.pk, status=self.Status.OPEN, iteration_count=self.iteration_count
        ).update(iteration_count=number)
        if not moved:
            raise LoopClosed(self)
        self.iteration_count = number
        iteration = LoopIteration.objects.create(
            loop=self, number=number, input=input, feedback=feedback
        )
        run.append_event("loop:iteration:start", self.agent, loopId=self.pk, iteration=number)
        return iteration

    def end_iteration(self, run, iteration: LoopIteration, *, output, shown, status, error=""):
        """The iteration ends with `output` (kept on its row and in the crumb); the host is
        given `shown` (on_iteration_end may have replaced it)."""
        if not iteration.finish(status, output=output, shown=shown, error=error):
            return  # already ended (by the execution that took the turn over): once only
        self.last_output = shown
        Loop.objects.filter(pk=self.pk).update(last_output=shown)
        run.append_event(
            "loop:iteration:end",
            self.agent,
            loopId=self.pk,
            iteration=iteration.number,
            output=output,
        )

    def close(self, run, status: str, *, result=None, error: str = "") -> bool:
        """End the loop once; False when it had already ended."""
        now = timezone.now()
        if not Loop.objects.filter(pk=self.pk, status=self.Status.OPEN).update(
            status=status, result=result, error=error, finished_at=now
        ):
            return False
        self.status, self.result, self.error, self.finished_at = status, result, error, now
        # An iteration cut short (the run was cancelled mid-pipeline) ends with its loop.
        self.iterations.filter(status=LoopIteration.Status.RUNNING).update(
            status=LoopIteration.Status.FAILED,
            error=error or "the loop was closed",
            finished_at=now,
        )
        crumb = {"loopId": self.pk, "status": status, "iterations": self.iteration_count}
        if result is not None:
            crumb["result"] = result
        run.append_event("loop:end", self.agent, **crumb)
        return True

    @classmethod
    def close_with_run(cls, sender, *, run, status: str, **_) -> None:
        """`runs.signals.run_ended`: a run that ends (failed after its worker was lost,
        cancelled, completed without its host closing one) leaves none of its loops open, nor
        their iterations running.
        Inside the run's own transaction; no hook runs here (hooks run in the host's turn)."""
        error = f"the run ended ({status}) before the loop did"
        for loop in cls.objects.filter(run=run, status=cls.Status.OPEN):
            loop.close(run, cls.Status.FAILED, error=error)


class LoopClosed(Exception):
    def __init__(self, loop: Loop):
        super().__init__(f"loop {loop.pk} is no longer open")
        self.loop = loop


class LoopIteration(models.Model):
    """One run of a loop's pipeline: its input, its output, its timing, and the runs.Iteration
    of each step (`steps`: [{"agent", "iteration", "attempt"}], every attempt kept)."""

    class Status(models.TextChoices):
        RUNNING = "running"
        COMPLETED = "completed"
        RECOVERED = "recovered"  # on_error supplied the output
        FAILED = "failed"

    loop = models.ForeignKey(Loop, on_delete=models.CASCADE, related_name="iterations")
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
    input = models.JSONField(null=True, blank=True)
    feedback = models.TextField(blank=True, help_text="The host's feedback that started it.")
    output = models.JSONField(null=True, blank=True, help_text="The pipeline's output, as it was.")
    shown_output = models.JSONField(
        null=True, blank=True, help_text="What the host was given, when a hook replaced it."
    )
    replaced = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=1)
    steps = models.JSONField(default=list, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["loop", "number"]
        constraints = [
            models.UniqueConstraint(fields=["loop", "number"], name="loop_iteration_number_unique")
        ]

    def __str__(self):
        return f"loop {self.loop_id} iteration {self.number} [{self.status}]"

    def add_step(self, agent: str, iteration_id: int) -> None:
        """Note a pipeline step; the same step noted again (a write retried on a new
        connection) is noted once."""
        step = {"agent": agent, "iteration": iteration_id, "attempt": self.attempts}
        with transaction.atomic():  # read and written under the row's lock: nothing lost
            rows = LoopIteration.objects.select_for_update().filter(pk=self.pk)
            noted = rows.values_list("steps", flat=True).get()
            if step not in noted:
                noted = [*noted, step]
                rows.update(steps=noted)
        self.steps = noted

    def retry(self) -> None:
        self.attempts += 1
        LoopIteration.objects.filter(pk=self.pk).update(attempts=self.attempts)

    def finish(self, status: str, *, output, shown, error: str = "") -> bool:
        """End the iteration once; False when it had already ended."""
        now = timezone.now()
        replaced = shown != output
        fields = {
            "status": status,
            "output": output,
            "shown_output": shown if replaced else None,
            "replaced": replaced,
            "error": error,
            "finished_at": now,
            "duration_ms": int((now - self.started_at).total_seconds() * 1000),
        }
        if not LoopIteration.objects.filter(pk=self.pk, status=self.Status.RUNNING).update(
            **fields
        ):
            return False
        for name, value in fields.items():
            setattr(self, name, value)
        return True

    def fail(self, error: str) -> None:
        self.finish(self.Status.FAILED, output=None, shown=None, error=error)

    @property
    def shown(self):
        """What the host was given."""
        return self.shown_output if self.replaced else self.output

    @property
    def answered(self) -> bool:
        return self.status in (self.Status.COMPLETED, self.Status.RECOVERED)


class HostCall(models.Model):
    """A host's tool call that changed a loop: its name and arguments, the loop and the
    iteration it ran. Written in the transaction of the loop's change, so the record holds
    exactly the calls whose work is kept; what each answered is read back from the loop's
    rows (LoopDriver.recorded_answer). A turn resumed after a lost worker takes over the
    lost turn's record (loops/driven/runner.py) and answers the same calls, made again in
    the same order, from it."""

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="+")
    host_iteration = models.ForeignKey(
        "runs.Iteration", on_delete=models.CASCADE, related_name="+", help_text="The turn."
    )
    seq = models.PositiveIntegerField()
    name = models.CharField(max_length=40)
    arguments = models.JSONField(default=dict, blank=True)
    loop = models.ForeignKey(Loop, on_delete=models.CASCADE, related_name="calls")
    iteration = models.PositiveIntegerField(
        null=True, blank=True, help_text="The loop iteration the call ran, if it ran one."
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["host_iteration", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["host_iteration", "seq"], name="host_call_seq_unique")
        ]

    def __str__(self):
        return f"{self.name} #{self.seq} of turn {self.host_iteration_id}"
