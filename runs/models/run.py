from django.conf import settings
from django.db import models, transaction
from django.db.models import F
from django.urls import reverse
from django.utils import timezone

from runs import kinds


class RunQuerySet(models.QuerySet):
    def visible_to(self, user, perm: str = "runs.view_run"):
        """The runs of the projects where `user` holds `perm` (console.projects)."""
        from console.projects import visible

        return visible(self, user, perm)


class Run(models.Model):
    class Status(models.TextChoices):
        """Where a run is in the kernel's terms. A kind says where it is in its own words
        in `phase` (a step machine's `verifying`, `approved`): see `status_word`."""

        PENDING = "pending"
        RUNNING = "running"
        # Waiting for a person: a decision at a gate, or (its phase says why) a kind's run
        # stopped until a person steps in.
        PAUSED = "paused"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"
        # Stopped between iterations at a limit of its budget; resumes once raised.
        BUDGET_EXCEEDED = "budget_exceeded"

    TERMINAL = {Status.COMPLETED, Status.FAILED, Status.CANCELLED}
    ACTIVE = {Status.PENDING, Status.RUNNING, Status.PAUSED}
    # Every status that is not finished: alive, including a run stopped at its budget or
    # waiting on a person (a child in any of these ends with its parent).
    UNFINISHED = set(Status) - TERMINAL
    # What each status means, in the words every page uses (badges, the inbox, the CLI); a
    # phase's meaning is its kind's (`LoopKind.phases`).
    MEANINGS = {
        Status.PENDING: "waiting to start",
        Status.RUNNING: "working",
        Status.PAUSED: "waiting for a decision at a gate",
        Status.COMPLETED: "finished",
        Status.FAILED: "stopped by an error or a rejection",
        Status.CANCELLED: "stopped by a person",
        Status.BUDGET_EXCEEDED: "stopped at a limit of its budget; an operator can raise it and resume",
    }

    recipe = models.ForeignKey("recipes.Recipe", on_delete=models.PROTECT, related_name="runs")
    # Its recipe's project when it was made (console.projects: who may see and steer it).
    project = models.ForeignKey("console.Project", on_delete=models.PROTECT, related_name="runs")
    recipe_version = models.ForeignKey(
        "recipes.RecipeVersion", on_delete=models.PROTECT, related_name="runs"
    )
    message = models.TextField(blank=True)
    inputs = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    # The run's kind's own word for where it is ("" when it says none): one of its
    # `LoopKind.phases`, shown instead of the status (`status_word`).
    phase = models.CharField(max_length=20, blank=True, default="")
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

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-id"]
        permissions = [("operate_run", "Can start, cancel and resume runs and decide at gates")]
        indexes = [
            # A status filter and its count (`Run.showing`): a kernel status without a
            # phase, or a phase.
            models.Index(fields=["status", "phase", "-id"], name="run_status_recent"),
            models.Index(fields=["phase", "-id"], name="run_phase_recent"),
            models.Index(fields=["recipe", "-id"], name="run_recipe_recent"),
            models.Index(fields=["-created_at"], name="run_created"),
            # The inbox's "recently finished": newest finish first, finished runs only (a
            # plain DESC order, which SQLite can index too).
            models.Index(
                models.F("finished_at").desc(),
                models.F("id").desc(),
                name="run_finished_recent",
                condition=models.Q(status__in=["cancelled", "completed", "failed"]),
            ),
        ]

    def __str__(self):
        return f"Run {self.pk} ({self.recipe_id and self.recipe.slug})"

    def save(self, *args, **kwargs):
        if self.project_id is None and self.recipe_id is not None:
            self.project_id = self.recipe.project_id  # a run is its recipe's project's
        super().save(*args, **kwargs)

    def get_absolute_url(self):
        return reverse("run_detail", args=[self.pk])

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    @property
    def starter(self) -> str:
        """Who started it, as the header and the runs list say it."""
        return self.started_by_name or (self.started_by.get_username() if self.started_by else "")

    # --- what a run shows as its status: its kind's phase when it has one, else its status.

    @property
    def status_word(self) -> str:
        """The status every surface shows (badges, lists, the API's `status`, the CLI,
        metrics, filters): the phase its kind set (`verifying`), else its status."""
        return self.phase or self.status

    @property
    def status_meaning(self) -> str:
        if self.phase:
            return kinds.of_run(self).phases.get(self.phase, "")
        return self.MEANINGS.get(self.status, "")

    @classmethod
    def status_words(cls) -> list[str]:
        """Every status a run can show: the kernel's, then each kind's phases."""
        words = list(cls.Status.values)
        for kind in kinds.all_kinds():
            words += [word for word in kind.phases if word not in words]
        return words

    @classmethod
    def meaning_of(cls, word: str) -> str:
        """What a shown status means (a badge's title): the kernel's, else a kind's."""
        if word in cls.MEANINGS:
            return cls.MEANINGS[word]
        return next((k.phases[word] for k in kinds.all_kinds() if word in k.phases), "")

    @classmethod
    def showing(cls, word: str) -> models.Q:
        """The runs that show `word` as their status (`?status=` on the pages, the API and
        the CLI): those in that phase, or with that status and no phase."""
        if word not in cls.Status.values:
            return models.Q(phase=word)
        kernel = models.Q(status=word, phase="")
        if any(word in kind.phases for kind in kinds.all_kinds()):
            return kernel | models.Q(phase=word)
        return kernel

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
    # `resume_within_budget`, `cancel`, `reopen`, and a kind's `set_phase`. Each is called
    # with the run's row lock held; `set_status` is the writer under them.

    def set_status(self, status: str, *, error: str | None = None, phase: str = "", **data) -> bool:
        """Write `status` and the kind's `phase` with it ("": none; no-op when both are
        already there) and log them as `run_<status_word>`; whether it moved. One
        conditional UPDATE of the columns it names, fenced by the status and phase this
        instance read (a stale instance moves nothing). Not for callers outside this model:
        they use the transitions below."""
        if self.status == status and self.phase == phase and error is None:
            return False
        previous, shown = self.status, self.status_word
        now = timezone.now()
        fields = {"status": status, "phase": phase, "updated_at": now}
        if status == self.Status.RUNNING and not self.started_at:
            fields["started_at"] = now
        if status in self.TERMINAL:
            if previous not in self.TERMINAL or not self.finished_at:  # an end is kept
                fields["finished_at"] = now
        else:
            fields["finished_at"] = None
        if error is not None:
            fields["error"] = error
        if not Run.objects.filter(pk=self.pk, status=previous, phase=self.phase).update(**fields):
            return False
        for name, value in fields.items():
            setattr(self, name, value)
        if phase:
            data["status"] = status  # the event is named by the phase: the status is told
        self.append_event(f"run_{phase or status}", previous=shown, error=error or "", **data)
        if status in self.TERMINAL and self.parent_id:
            # The parent's workflow node waits for its children holding no worker: a child
            # that ends moves it on (and the sweep does, should this message be lost).
            from runs import dispatch

            dispatch.send_on_commit("advance_run", self.parent_id)
        if status in self.TERMINAL:
            from runs import signals

            signals.run_ended.send(Run, run=self, status=status)
        return True

    def set_phase(self, phase: str, **data) -> bool:
        """The run's kind says where its run is in its own words (one of its
        `LoopKind.phases`), its status unchanged: a finished step machine's review request
        merged. Logged as `run_<phase>`; whether it moved."""
        if self.phase == phase:
            return False
        shown, now = self.status_word, timezone.now()
        moved = Run.objects.filter(pk=self.pk, status=self.status, phase=self.phase).update(
            phase=phase, updated_at=now
        )
        if not moved:
            return False
        self.phase, self.updated_at = phase, now
        self.append_event(f"run_{self.status_word}", previous=shown, status=self.status, **data)
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
        running. Rows a kind runs outside its graph (`LoopKind.rows_outside_graph`: a
        Python run's agents, reported by their `workflow` node) are left out."""
        from .node import NodeRun

        if self.is_terminal or self.status == self.Status.BUDGET_EXCEEDED:
            return  # a budget stop holds until an operator resumes (runs.budget)
        kind = kinds.of_run(self)
        own = kind.derived_status(self, finished=finished)
        if own is not None:
            # A kind that says its own status derives it, with its phase if it gives one
            # (a step machine's loop.status: running, `verifying`).
            status, error, *phase = own
            phase = phase[0] if phase else ""
            if status != self.status or phase != self.phase or (error and error != self.error):
                self.set_status(status, error=error, phase=phase)
            return
        nodes = NodeRun.objects.filter(run=self)
        if finished:
            failed = (
                nodes.filter(iteration=0, status=NodeRun.Status.FAILED)
                .exclude(kind__in=kind.rows_outside_graph)
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
