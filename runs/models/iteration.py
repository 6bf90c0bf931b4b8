from django.db import models


class Iteration(models.Model):
    """One pass of a loop (one agent session) or of a loop_group's body."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        COMPLETED = "completed"
        TIMED_OUT = "timed_out"
        FAILED = "failed"
        CANCELLED = "cancelled"

    FINISHED = {Status.COMPLETED, Status.TIMED_OUT, Status.FAILED, Status.CANCELLED}

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
    structured = models.JSONField(null=True, blank=True)
    channels = models.JSONField(default=list, blank=True, help_text="Completion channels fired.")
    error = models.TextField(blank=True)
    session_id = models.CharField(max_length=200, blank=True)
    tokens_in = models.PositiveIntegerField(null=True, blank=True)
    tokens_out = models.PositiveIntegerField(null=True, blank=True)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)

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
    def completed_signal(self) -> bool:
        return bool(self.channels)
