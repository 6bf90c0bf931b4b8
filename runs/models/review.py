from django.conf import settings
from django.db import models
from django.urls import reverse


class ReviewRequest(models.Model):
    """What a step-machine run asks a person to merge: its branch, commits and diff against
    the target branch. Only a person with the operator role merges it, from its page
    (`merge_policy: human`); who merged, when and the merge commit are kept here and in the
    run's event log (the audit log of merges)."""

    class Status(models.TextChoices):
        OPEN = "open"
        MERGED = "merged"
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
