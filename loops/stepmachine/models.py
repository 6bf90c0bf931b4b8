"""The step machine's own tables: the handoffs its roles record and the review requests a
person merges. They lived in the kernel app until issue 24 (tables `runs_handoff` and
`runs_reviewrequest`); this app's first migrations adopted them with their rows."""

from django.conf import settings
from django.db import models
from django.urls import reverse

from loops.stepmachine.spec import HANDOFF_SCHEMA, HANDOFF_STATUSES


class Handoff(models.Model):
    """A role's structured report to a step-machine run: recorded only through
    `loops.stepmachine.handoffs.record_handoff` (CLI, API, the agent's tool), never read from
    files. `seq` is the run event that recorded it: a `handoff.wait` takes the latest one
    from its role recorded after the run's last consumed handoff."""

    class Surface(models.TextChoices):
        CONSOLE = "console"
        API = "api"
        CLI = "cli"
        AGENT = "agent"

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="handoffs")
    role = models.CharField(max_length=100)
    status = models.CharField(max_length=20)
    summary = models.TextField(blank=True)
    data = models.JSONField(null=True, blank=True)
    content = models.JSONField(help_text="The handoff document as recorded (schema, status, ...).")
    seq = models.PositiveIntegerField(help_text="Sequence number of the run event recording it.")
    iteration = models.ForeignKey(
        "runs.Iteration", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    recorded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    recorded_by_name = models.CharField(max_length=150, blank=True)
    surface = models.CharField(max_length=20, choices=Surface.choices)
    recorded_at = models.DateTimeField(auto_now_add=True)
    consumed_at = models.DateTimeField(null=True, blank=True)
    consumed_by_step = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["run", "seq"]
        indexes = [models.Index(fields=["run", "role", "-seq"], name="handoff_latest")]

    def __str__(self):
        return f"handoff {self.role} {self.status} (run {self.run_id})"

    @property
    def accepted_form(self) -> bool:
        """The document itself is a valid handoff (the rest of acceptance is the run's)."""
        content = self.content if isinstance(self.content, dict) else {}
        return content.get("schema") == HANDOFF_SCHEMA and content.get("status") in HANDOFF_STATUSES

    def as_dict(self) -> dict:
        return {
            "id": self.pk,
            "role": self.role,
            "status": self.status,
            "summary": self.summary,
            "data": self.data,
            "schema": (self.content or {}).get("schema"),
            "seq": self.seq,
            "recorded_by": self.recorded_by_name or None,
            "surface": self.surface,
            "recorded_at": self.recorded_at.isoformat() if self.recorded_at else None,
            "consumed_at": self.consumed_at.isoformat() if self.consumed_at else None,
            "consumed_by_step": self.consumed_by_step or None,
            "standing": getattr(self, "standing", None),
        }


class ReviewRequest(models.Model):
    """What a step-machine run asks a person to merge: its branch, commits and diff against
    the target branch. Only a person with the operator role merges it, from its page
    (`merge_policy: human`); who merged, when and the merge commit are kept here and in the
    run's event log (the audit log of merges)."""

    class Status(models.TextChoices):
        OPEN = "open"
        MERGED = "merged"
        # Its branch holds no commit the target lacks: nobody is asked to merge it.
        NOTHING_TO_MERGE = "nothing_to_merge", "Nothing to merge"
        CLOSED = "closed"

    run = models.OneToOneField("runs.Run", on_delete=models.CASCADE, related_name="review")
    repository = models.CharField(max_length=1000)
    branch = models.CharField(max_length=255)
    target_branch = models.CharField(max_length=255)
    head_commit = models.CharField(max_length=64)
    target_commit = models.CharField(max_length=64, help_text="The target's head when recorded.")
    commits = models.JSONField(default=list, blank=True)
    diff_stat = models.TextField(blank=True)
    diff = models.TextField(blank=True)
    diff_truncated = models.BooleanField(default=False)
    push = models.TextField(blank=True, help_text="What pushing to the remote said, if tried.")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.OPEN)
    merged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    merged_by_name = models.CharField(max_length=150, blank=True)
    merged_at = models.DateTimeField(null=True, blank=True)
    merge_commit = models.CharField(max_length=64, blank=True)
    last_refusal = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"review {self.branch} → {self.target_branch} (run {self.run_id})"

    def get_absolute_url(self):
        return reverse("run_review", args=[self.run_id])

    @property
    def is_open(self) -> bool:
        return self.status == self.Status.OPEN
