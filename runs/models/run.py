from django.conf import settings
from django.db import models, transaction
from django.db.models import F
from django.urls import reverse
from django.utils import timezone

from runs import kinds


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
        # Stopped between iterations at a limit of its budget; resumes once raised.
        BUDGET_EXCEEDED = "budget_exceeded"
        # Statuses a step-machine recipe sets (loop.status); see MEANINGS.
        OBSERVING = "observing"
        VERIFYING = "verifying"
        COMPLETED_UNREVIEWED = "completed_unreviewed"
        APPROVED = "approved"
        # A finished step-machine run whose review request a person merged.
        MERGED = "merged"

    TERMINAL = {
        Status.COMPLETED,
        Status.FAILED,
        Status.CANCELLED,
        Status.COMPLETED_UNREVIEWED,
        Status.APPROVED,
        Status.MERGED,
    }
    ACTIVE = {
        Status.PENDING,
        Status.RUNNING,
        Status.PAUSED,
        Status.BLOCKED,
        Status.NEEDS_HUMAN,
        Status.OBSERVING,
        Status.VERIFYING,
    }
    # Every status that is not finished: alive, including a run stopped at its budget or
    # waiting on a person (a child in any of these ends with its parent).
    UNFINISHED = set(Status) - TERMINAL
    # Live, but the runner has stopped until a person steps in.
    NEEDS_PERSON = {Status.BLOCKED, Status.NEEDS_HUMAN}
    # What each status means, in the words every page uses (badges, the inbox, the CLI).
    MEANINGS = {
        Status.PENDING: "waiting to start",
        Status.RUNNING: "working",
        Status.PAUSED: "waiting for a decision at a gate",
        Status.COMPLETED: "finished",
        Status.FAILED: "stopped by an error or a rejection",
        Status.CANCELLED: "stopped by a person",
        Status.BLOCKED: "stopped: a limit was reached or an agent is blocked; a person must step in",
        Status.NEEDS_HUMAN: "stopped: an agent asks for a person's decision",
        Status.OBSERVING: "working: watching before it acts",
        Status.VERIFYING: "working: checking the result",
        Status.COMPLETED_UNREVIEWED: "finished; no person has reviewed the result yet",
        Status.APPROVED: "every check passed; ready for a person to merge",
        Status.MERGED: "finished; a person merged its review request",
        Status.BUDGET_EXCEEDED: "stopped at a limit of its budget; an operator can raise it and resume",
    }

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
    # Who started it as every surface says it: the account, or one without a person
    # ("cli (alice)", "script"); a child run says its parent's.
    started_by_name = models.CharField(max_length=150, blank=True)
    rerun_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reruns"
    )
    # A child run started by a `workflow:` node: that node, its run, the fan_out item index.
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    parent_node = models.ForeignKey(
        "runs.NodeRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="child_runs"
    )
    child_index = models.PositiveIntegerField(null=True, blank=True)
    forked_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks"
    )
    # Where a fork continues: {"node", "iteration", "iteration_id", "feedback", "prompt"}.
    fork_point = models.JSONField(default=dict, blank=True)
    # What the run started with besides its (immutable) recipe version: the command files
    # and included workflows it uses (recipes/formats/snapshot.py, runs/executor/spec.py).
    snapshot = models.JSONField(default=dict, blank=True)
    # Limits of this run ({"cost_usd", "tokens", "wall_seconds", "iterations"}, any subset):
    # checked between iterations by runs.budget.
    budget = models.JSONField(default=dict, blank=True)
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
            # The inbox's "recently finished": newest finish first, finished runs only (a
            # plain DESC order, which SQLite can index too).
            models.Index(
                models.F("finished_at").desc(),
                models.F("id").desc(),
                name="run_finished_recent",
                condition=models.Q(
                    status__in=[
                        "approved",
                        "cancelled",
                        "completed",
                        "completed_unreviewed",
                        "failed",
                        "merged",
                    ]
                ),
            ),
        ]

    def __str__(self):
        return f"Run {self.pk} ({self.recipe_id and self.recipe.slug})"

    def get_absolute_url(self):
        return reverse("run_detail", args=[self.pk])

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    @property
    def starter(self) -> str:
        """Who started it, as the header and the runs list say it."""
        return self.started_by_name or (self.started_by.get_username() if self.started_by else "")

    @property
    def status_meaning(self) -> str:
        return self.MEANINGS.get(self.status, "")

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

    # --- status: `start`, `update_status` (the one derivation), `fail`, `stop_at_budget`,
    # `resume_within_budget`, `cancel`, `merged`, `reopen`. Each is called with the run's
    # row lock held; `set_status` is the writer under them.

    def set_status(self, status: str, *, error: str | None = None, **data) -> bool:
        """Write `status` (no-op when already there) and log it; whether it moved. One
        conditional UPDATE of the columns it names, fenced by the status this instance
        read (a stale instance moves nothing). Not for callers outside this model: they
        use the transitions below."""
        if self.status == status and error is None:
            return False
        previous = self.status
        now = timezone.now()
        fields = {"status": status, "updated_at": now}
        if status == self.Status.RUNNING and not self.started_at:
            fields["started_at"] = now
        if status in self.TERMINAL:
            if previous not in self.TERMINAL or not self.finished_at:  # merged keeps its end
                fields["finished_at"] = now
        else:
            fields["finished_at"] = None
        if error is not None:
            fields["error"] = error
        if not Run.objects.filter(pk=self.pk, status=previous).update(**fields):
            return False
        for name, value in fields.items():
            setattr(self, name, value)
        self.append_event(f"run_{status}", previous=previous, error=error or "", **data)
        if status in self.TERMINAL and self.parent_id:
            # The parent's workflow node waits for its children holding no worker: a child
            # that ends moves it on (and the sweep does, should this message be lost).
            from runs import dispatch

            dispatch.send_on_commit("advance_run", self.parent_id)
        if status in self.TERMINAL:
            from runs import signals

            signals.run_ended.send(Run, run=self, status=status)
        return True

    def start(self) -> bool:
        """A pending run begins (the scheduler's first pass, or a script that runs it)."""
        if self.status != self.Status.PENDING:
            return False
        return self.set_status(self.Status.RUNNING)

    def update_status(self, *, finished: bool = False, **data) -> None:
        """Derive the run's status from its nodes: the one place that does.

        `finished` (every node of the run's graph is terminal): failed if one of them
        failed, else completed. Otherwise paused while a node waits at a gate, else
        running. A Python run's agent rows (kind `agent`) are reported by their
        `workflow` node, which the derivation reads instead."""
        from .node import NodeRun

        if self.is_terminal or self.status == self.Status.BUDGET_EXCEEDED:
            return  # a budget stop holds until an operator resumes (runs.budget)
        kind = kinds.of_run(self)
        if kind is not None and kind.derived_status is not None:
            # A kind that says its own status (a step machine's loop.status) derives it.
            status, error = kind.derived_status(self, finished=finished)
            if status != self.status or (error and error != self.error):
                self.set_status(status, error=error)
            return
        nodes = NodeRun.objects.filter(run=self)
        if finished:
            failed = (
                nodes.filter(iteration=0, status=NodeRun.Status.FAILED)
                .exclude(kind="agent")
                .first()
            )
            if failed:
                error = f"node '{failed.node_id}' failed: {failed.error}"
                # What is left unfinished outside the graph (a Python run's agent rows and
                # the call they were in) stops with it: a failed run has nothing running.
                self.stop_all_work(error)
                self.set_status(self.Status.FAILED, error=error, **data)
            else:
                self.set_status(self.Status.COMPLETED, error="", **data)
            return
        paused = nodes.filter(status=NodeRun.Status.PAUSED).exists()
        wanted = self.Status.PAUSED if paused else self.Status.RUNNING
        if self.status != wanted:
            self.set_status(wanted, **data)

    def fail(self, error: str, **data) -> bool:
        """An error no node owns (the recipe does not load, the engine crashed, its worktree
        could not be made): the run fails now, with the message on its page, and its
        unfinished work stops. False when it had already ended."""
        if self.is_terminal:
            return False
        self.stop_all_work(error)
        return self.set_status(self.Status.FAILED, error=error, **data)

    def stop_at_budget(self, error: str, **data) -> bool:
        """A limit of its budget is reached (runs.budget): it stops between iterations,
        budget_exceeded, until an operator raises the limit and resumes it."""
        if self.status not in self.UNFINISHED or self.status == self.Status.BUDGET_EXCEEDED:
            return False
        return self.set_status(self.Status.BUDGET_EXCEEDED, error=error, **data)

    def resume_within_budget(self, actor) -> bool:
        """Its budget was raised: a run stopped by it runs again (the caller gives back
        the work the stop held, runs.budget.resume_held_work)."""
        if self.status != self.Status.BUDGET_EXCEEDED:
            return False
        return self.set_status(self.Status.RUNNING, error="", by=actor.name, surface=actor.surface)

    def cancel(self, actor, reason: str = "", *, error: str = "") -> str:
        """Stop everything unfinished and end the run as cancelled by `actor`; returns the
        reason its unfinished work records (a cancelled gate says the same). `error`, the
        run's own line, defaults to that reason."""
        text = reason or f"cancelled by {actor.name}"
        self.stop_all_work(text, actor)
        self.set_status(
            self.Status.CANCELLED, error=error or text, by=actor.name, surface=actor.surface
        )
        return text

    def merged(self, actor, **data) -> None:
        """A person merged this finished run's review request: it ends merged (its finish
        time stays the run's own)."""
        if self.status in (self.Status.APPROVED, self.Status.COMPLETED_UNREVIEWED):
            self.set_status(self.Status.MERGED, by=actor.name, surface=actor.surface, **data)

    def reopen(self, actor, **data) -> None:
        """A failed or cancelled run runs again (resume): running, its error cleared."""
        self.set_status(self.Status.RUNNING, error="", by=actor.name, surface=actor.surface, **data)

    def stop_all_work(self, reason: str, actor=None) -> None:
        """Cancel every unfinished piece of the run (the caller holds the run's lock).
        Running agents notice at their next flush; what they printed so far is kept."""
        from runs.actor import ENGINE

        from .gate import Gate
        from .iteration import Iteration
        from .node import NodeRun

        actor = actor or ENGINE
        now = timezone.now()
        Gate.objects.filter(run=self, status=Gate.Status.PENDING).update(
            status=Gate.Status.CANCELLED,
            decided_at=now,
            comment=reason,
            decided_by=actor.person,
            decided_by_name=actor.name,
            surface=actor.surface,
        )
        Iteration.objects.filter(run=self, status=Iteration.Status.PENDING).update(
            status=Iteration.Status.CANCELLED, finished_at=now, error=reason
        )
        running = Iteration.objects.filter(run=self, status=Iteration.Status.RUNNING)
        for it in running.only("pk", "started_at"):
            Iteration.objects.filter(pk=it.pk, status=Iteration.Status.RUNNING).update(
                status=Iteration.Status.CANCELLED,
                finished_at=now,
                error=reason,
                lease_expires_at=None,
                duration_ms=it.elapsed_ms(),
                output=F("raw_output"),  # what the agent printed up to its last flush
            )
        NodeRun.objects.filter(run=self, status__in=NodeRun.UNFINISHED).update(
            status=NodeRun.Status.CANCELLED, finished_at=now, error=reason, lease_expires_at=None
        )
        # Child runs go with their parent (locked parent first, then child: the only order).
        children = Run.objects.select_for_update().filter(parent=self, status__in=self.UNFINISHED)
        for child in children:
            text = f"run {self.pk}, which started it, stopped: {reason}"
            child.stop_all_work(text, actor)
            child.set_status(self.Status.CANCELLED, error=text)
