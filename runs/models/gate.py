from django.conf import settings
from django.db import models


class Gate(models.Model):
    """A pause for a human decision: after an interactive loop iteration, or at an approval node."""

    class Kind(models.TextChoices):
        LOOP = "loop", "Loop gate"
        APPROVAL = "approval", "Approval"

    class Status(models.TextChoices):
        PENDING = "pending"
        ACCEPTED = "accepted"
        ITERATED = "iterated"
        REJECTED = "rejected"
        CANCELLED = "cancelled"

    class Surface(models.TextChoices):
        CONSOLE = "console"
        API = "api"
        CLI = "cli"
        ENGINE = "engine"

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="gates")
    node_run = models.ForeignKey("runs.NodeRun", on_delete=models.CASCADE, related_name="gates")
    iteration = models.ForeignKey(
        "runs.Iteration", null=True, blank=True, on_delete=models.CASCADE, related_name="gates"
    )
    node_id = models.CharField(max_length=300)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    message = models.TextField()
    completion_signaled = models.BooleanField(default=False)
    channels = models.JSONField(default=list, blank=True)
    decisions = models.JSONField(default=list, blank=True, help_text="Declared decision choices.")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    comment = models.TextField(blank=True)
    decision = models.CharField(max_length=100, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    surface = models.CharField(max_length=20, choices=Surface.choices, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["status", "created_at"], name="gate_waiting")]
        constraints = [
            models.UniqueConstraint(
                fields=["node_run"],
                condition=models.Q(status="pending"),
                name="one_pending_gate_per_node",
            )
        ]

    def __str__(self):
        return f"Gate {self.pk} {self.node_id} [{self.status}]"

    @property
    def is_pending(self) -> bool:
        return self.status == self.Status.PENDING

    @property
    def status_line(self) -> str:
        return self.message.split("\n", 1)[0]

    @property
    def iteration_number(self):
        return self.iteration.number if self.iteration_id else None

    def as_dict(self) -> dict:
        return {
            "id": self.pk,
            "node": self.node_id,
            "iteration": self.iteration_number,
            "kind": self.kind,
            "message": self.message,
            "completion_signaled": self.completion_signaled,
            "status": self.status,
            "decisions": self.decisions,
            "comment": self.comment,
            "decision": self.decision,
            "decided_by": self.decided_by.get_username() if self.decided_by_id else None,
            "decided_at": self.decided_at.isoformat() if self.decided_at else None,
            "surface": self.surface,
        }
