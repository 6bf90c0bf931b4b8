from django.db import models
from django.utils import timezone


class NodeRun(models.Model):
    """One node of a run. Top-level nodes have iteration 0; a loop_group's body nodes get
    one row per group iteration, with the namespaced id `group.node`."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        PAUSED = "paused"
        COMPLETED = "completed"
        FAILED = "failed"
        SKIPPED = "skipped"
        CANCELLED = "cancelled"

    TERMINAL = {Status.COMPLETED, Status.FAILED, Status.SKIPPED, Status.CANCELLED}

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="nodes")
    node_id = models.CharField(max_length=300)
    kind = models.CharField(max_length=20)
    iteration = models.PositiveIntegerField(default=0, help_text="Enclosing group's iteration.")
    generation = models.PositiveIntegerField(default=0, help_text="Bumped by a failure resume.")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    output = models.TextField(blank=True)
    structured = models.JSONField(null=True, blank=True)
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

    @property
    def progress_percent(self) -> int:
        if not self.max_iterations:
            return 0
        return min(100, round(100 * self.iteration_count / self.max_iterations))
