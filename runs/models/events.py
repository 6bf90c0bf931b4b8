from django.db import models


class RunEvent(models.Model):
    """One entry of a run's ordered log. Every state change appends one; the page, the API
    and the live stream all read this log."""

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=60)
    step = models.CharField(max_length=300, blank=True, help_text="Namespaced node id.")
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="run_event_seq_unique")]

    def __str__(self):
        return f"#{self.seq} {self.kind} {self.step}".strip()

    def as_dict(self) -> dict:
        return {
            "seq": self.seq,
            "kind": self.kind,
            "step": self.step,
            "data": self.data,
            "at": self.created_at.isoformat() if self.created_at else None,
        }
