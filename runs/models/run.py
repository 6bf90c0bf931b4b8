from django.conf import settings
from django.db import models, transaction
from django.urls import reverse
from django.utils import timezone


class Run(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        PAUSED = "paused"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"
        BLOCKED = "blocked"
        NEEDS_HUMAN = "needs_human"

    TERMINAL = {Status.COMPLETED, Status.FAILED, Status.CANCELLED}
    ACTIVE = {Status.PENDING, Status.RUNNING, Status.PAUSED, Status.BLOCKED, Status.NEEDS_HUMAN}

    recipe = models.ForeignKey("recipes.Recipe", on_delete=models.PROTECT, related_name="runs")
    recipe_version = models.ForeignKey(
        "recipes.RecipeVersion", on_delete=models.PROTECT, related_name="runs"
    )
    message = models.TextField(blank=True)
    inputs = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    rerun_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reruns"
    )
    workdir = models.CharField(max_length=1000, blank=True)
    error = models.TextField(blank=True)
    last_seq = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]
        permissions = [("operate_run", "Can start, cancel and resume runs and decide at gates")]
        indexes = [
            models.Index(fields=["status", "-id"], name="run_status_recent"),
            models.Index(fields=["recipe", "-id"], name="run_recipe_recent"),
            models.Index(fields=["-created_at"], name="run_created"),
        ]

    def __str__(self):
        return f"Run {self.pk} ({self.recipe_id and self.recipe.slug})"

    def get_absolute_url(self):
        return reverse("run_detail", args=[self.pk])

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    @property
    def duration(self):
        if not self.started_at:
            return None
        return (self.finished_at or timezone.now()) - self.started_at

    def append_event(self, event_kind: str, step: str = "", **data):
        """Append to the run's ordered log. Must run inside a transaction: the row update
        that allocates the sequence number also serialises concurrent writers."""
        from . import RunEvent

        connection = transaction.get_connection()
        assert connection.in_atomic_block, "append_event needs a transaction"
        created_at = timezone.now()
        if connection.vendor == "postgresql":
            event_id, seq = self._append_in_one_statement(
                connection, event_kind, step, data, created_at
            )
        else:  # SQLite cannot update inside a CTE: bump, then insert
            with connection.cursor() as cursor:
                cursor.execute(
                    f"UPDATE {Run._meta.db_table} SET last_seq = last_seq + 1 WHERE id = %s "
                    "RETURNING last_seq",
                    [self.pk],
                )
                seq = cursor.fetchone()[0]
            event_id = None
        self.last_seq = seq
        if event_id is None:
            event = RunEvent.objects.create(
                run_id=self.pk, seq=seq, kind=event_kind, step=step, data=data
            )
        else:
            event = RunEvent(
                id=event_id,
                run_id=self.pk,
                seq=seq,
                kind=event_kind,
                step=step,
                data=data,
                created_at=created_at,
            )
            event._state.adding = False
            event._state.db = connection.alias
        from runs import live

        transaction.on_commit(lambda: live.publish_event(self.pk, event.as_dict()))
        return event

    def _append_in_one_statement(self, connection, event_kind, step, data, created_at):
        """One round trip: the CTE bumps the run's counter (which also takes the row lock
        that serialises writers) and inserts the event under the number it got."""
        from . import RunEvent

        data_param = RunEvent._meta.get_field("data").get_db_prep_value(data, connection)
        with connection.cursor() as cursor:
            cursor.execute(
                f"WITH bumped AS (UPDATE {Run._meta.db_table} SET last_seq = last_seq + 1 "
                "WHERE id = %s RETURNING last_seq) "
                f"INSERT INTO {RunEvent._meta.db_table} "
                "(run_id, seq, kind, step, data, created_at) "
                "SELECT %s, last_seq, %s, %s, %s, %s FROM bumped RETURNING id, seq",
                [self.pk, self.pk, event_kind, step, data_param, created_at],
            )
            return cursor.fetchone()

    def set_status(self, status: str, *, error: str | None = None, **data) -> bool:
        """Move to `status` (no-op when already there) and log it."""
        if self.status == status and error is None:
            return False
        previous = self.status
        self.status = status
        now = timezone.now()
        fields = {"status": status, "updated_at": now}
        if status == self.Status.RUNNING and not self.started_at:
            self.started_at = fields["started_at"] = now
        if status in self.TERMINAL:
            self.finished_at = fields["finished_at"] = now
        else:
            self.finished_at = fields["finished_at"] = None
        if error is not None:
            self.error = fields["error"] = error
        Run.objects.filter(pk=self.pk).update(**fields)
        self.append_event(f"run_{status}", previous=previous, error=error or "", **data)
        return True
