from datetime import timedelta

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils import timezone
from django.utils.functional import cached_property

from runs.errors import AlreadyDecided, Conflict, NotFound, ServiceError

# The longest feedback a gate takes (the forms, the API and `decide` share it).
COMMENT_LIMIT = 100_000


class GateQuerySet(models.QuerySet):
    def for_decision(self, run, gate_id: int | None = None):
        """The gate to decide: the one the caller names, else the run's pending gate.

        One rule for the console, the API and the CLI: a gate no longer pending is a
        Conflict that says who decided it and when."""
        gates = self.filter(run=run).select_related("decided_by", "iteration")
        if gate_id is not None:
            named = gates.filter(pk=gate_id).first()
            if named is None:
                raise NotFound(f"Run {run.pk} has no gate {gate_id}.")
            if not named.is_pending:
                raise AlreadyDecided(named)
            return named
        pending = gates.filter(status=Gate.Status.PENDING).first()
        if pending is not None:
            return pending
        last = (
            gates.exclude(status=Gate.Status.PENDING)
            .order_by(F("decided_at").desc(nulls_last=True), "-id")
            .first()
        )
        if last is not None:
            raise AlreadyDecided(last)
        raise Conflict(f"Run {run.pk} is {run.status_word} and has no gate waiting.")

    def overdue(self, now):
        """Pending gates past their deadline that still have something to do: an
        escalation not yet made, a declared decision to take, a reminder not yet sent, or
        a reject / fail (the `gate_deadline` index: status, then time). An escalated gate's
        deadline is its second one (`Gate.escalate` moved it)."""
        to_escalate = ~Q(escalate_to=[]) & Q(escalated_at__isnull=True)
        return self.filter(
            status=Gate.Status.PENDING, deadline_at__isnull=False, deadline_at__lte=now
        ).filter(
            to_escalate
            | ~Q(timeout_decision="")
            | ~Q(on_timeout=Gate.OnTimeout.REMIND)
            | Q(reminded_at__isnull=True)
        )


REJECT_NEEDS_A_REASON = "Say why you reject: the reason stays on the run."

# What a declared decision does to its gate (`then:`): a loop's decisions complete,
# iterate or fail it; an approval's approve (the node completes with the decision's id).
THEN_STATUS = {
    "complete": "accepted",
    "approve": "accepted",
    "iterate": "iterated",
    "fail": "rejected",
    "reject": "rejected",
}


def decision(id_, label, then, text_required=False) -> dict:
    return {"id": id_, "label": label, "text_required": text_required, "then": then}


REJECT = decision("reject", "Reject", "reject", text_required=True)


class Gate(models.Model):
    """A pause for a human decision: after an interactive loop iteration, or at an approval node."""

    class Kind(models.TextChoices):
        LOOP = "loop", "Loop gate"
        APPROVAL = "approval", "Approval"
        # A soft budget reached: go on for about the forecast's amount more, or stop.
        BUDGET = "budget", "Budget"

    class Status(models.TextChoices):
        PENDING = "pending"
        ACCEPTED = "accepted"
        ITERATED = "iterated"
        REJECTED = "rejected"
        CANCELLED = "cancelled"
        TIMED_OUT = "timed_out"  # no decision before the deadline, and on_timeout: fail

    class OnTimeout(models.TextChoices):
        """What the sweep does when a gate's deadline passes. Never approve: a deadline
        cannot decide for a person."""

        REMIND = "remind", "remind (the gate keeps waiting)"
        REJECT = "reject", "reject (the step fails)"
        FAIL = "fail", "fail the run"

    class Surface(models.TextChoices):
        CONSOLE = "console"
        API = "api"
        CLI = "cli"
        MCP = "mcp"  # an orchestrating agent, through the MCP server
        ENGINE = "engine"
        SWEEP = "sweep"
        LINK = "link"  # a signed decision link, from a mail or a webhook's notification
        SLACK = "slack"  # a button of the gate's Slack message

    # The kinds of gate whose decisions are the ones it declares (`decisions`).
    DECLARES = (Kind.APPROVAL, Kind.BUDGET)

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
    decided_by_name = models.CharField(
        max_length=150, blank=True, help_text="Who decided, as every page shows it."
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    surface = models.CharField(max_length=20, choices=Surface.choices, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # A deadline (`gate_timeout` in a recipe): when it passes, the sweep does `on_timeout`.
    deadline_at = models.DateTimeField(null=True, blank=True)
    timeout_seconds = models.PositiveIntegerField(null=True, blank=True)
    on_timeout = models.CharField(max_length=10, choices=OnTimeout.choices, blank=True)
    reminded_at = models.DateTimeField(null=True, blank=True)
    carried_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="carried_copies"
    )
    # What the reviewer is shown, hashed when the gate opens (runs.review): a decision made
    # on other content than today's is refused. `digest_parts` says which part changed.
    digest = models.CharField(max_length=64, blank=True)
    digest_parts = models.JSONField(default=dict, blank=True)
    # Quorum: how many distinct people must approve (GateResponse rows count them).
    approvals_needed = models.PositiveSmallIntegerField(default=1)
    # Escalation: at the first deadline these (group or user names) are told, and the
    # deadline moves on by `escalate_seconds`; at that second one `on_timeout` acts.
    escalate_to = models.JSONField(default=list, blank=True)
    escalate_seconds = models.PositiveIntegerField(null=True, blank=True)
    escalated_at = models.DateTimeField(null=True, blank=True)
    # A declared decision the deadline takes instead of on_timeout (never one that completes).
    timeout_decision = models.CharField(max_length=100, blank=True)

    objects = GateQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["status", "created_at"], name="gate_waiting"),
            models.Index(fields=["status", "deadline_at"], name="gate_deadline"),
        ]
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

    @property
    def decision_label(self) -> str:
        """The chosen decision as its button said it ("Hold"), else its id."""
        for choice in self.decisions or []:
            if isinstance(choice, dict) and choice.get("id") == self.decision:
                return choice.get("label") or self.decision
        return self.decision

    @property
    def decider(self) -> str:
        """Who decided (or cancelled) this gate, the same words on every surface."""
        if self.decided_by_name:
            return self.decided_by_name
        return self.decided_by.get_username() if self.decided_by_id else ""

    # --- the decisions it offers: every surface reads them here (runs.decisions.respond) --

    @property
    def offered_decisions(self) -> list[dict]:
        """What a reviewer may answer, each `{id, label, text_required, then}`: the gate's
        declared decisions (an approval's keep `reject` beside them), else the default set
        of its kind."""
        declared = [self._declared(d) for d in self.decisions or [] if isinstance(d, dict)]
        if self.kind == self.Kind.LOOP:
            return declared or self._loop_defaults()
        if self.kind == self.Kind.APPROVAL:
            return (declared or [decision("approve", "Approve", "approve")]) + [REJECT]
        return declared + [REJECT]

    @property
    def wording_needed_by(self) -> list[str]:
        """The labels of the approving decisions that need a text (the form says so)."""
        return [
            d["label"]
            for d in self.offered_decisions
            if d["text_required"] and d["then"] not in ("reject", "fail")
        ]

    def _declared(self, choice: dict) -> dict:
        default_then = "complete" if self.kind == self.Kind.LOOP else "approve"
        return decision(
            choice["id"],
            choice.get("label") or choice["id"],
            choice.get("then") or default_then,
            bool(choice.get("text_required")),
        )

    def _loop_defaults(self) -> list[dict]:
        reject = decision("reject", "Reject", "fail", text_required=True)
        if not self.completion_signaled:
            return [decision("continue", "Continue", "iterate"), reject]
        return [
            decision("accept", "Accept & complete", "complete"),
            decision("feedback", "Iterate with feedback", "iterate", text_required=True),
            reject,
        ]

    @cached_property
    def digest_now(self) -> str:
        """The digest of what the gate shows as a page renders it; its forms send it back."""
        from runs import review

        return review.current_digest(self)

    def partial_approvals(self):
        return self.responses.filter(closed_gate=False)

    def approvals_given(self) -> int:
        """Distinct people whose approval counts towards the quorum so far."""
        return self.responses.filter(closed_gate=False).values("by_name").distinct().count()

    # --- the decision rule: the template, the script and `decide` all read it here ------

    @property
    def empty_approve_completes(self) -> bool:
        """Approving with no feedback accepts the iteration and completes the node; any
        feedback asks for another iteration instead."""
        return self.kind == self.Kind.LOOP and self.completion_signaled

    def outcome(self, action: str, comment: str = "") -> str:
        """The status deciding `action` ("approve" or "reject") with `comment` leads to."""
        if action == "reject":
            return self.Status.REJECTED
        if action != "approve":
            raise ServiceError(f"Unknown action '{action}'.")
        if self.kind == self.Kind.LOOP:
            if self.empty_approve_completes and not comment.strip():
                return self.Status.ACCEPTED
            return self.Status.ITERATED
        return self.Status.ACCEPTED

    @property
    def plain_approve_accepts(self) -> bool:
        """Approving with no comment and no choice of decision accepts: what the `a` key
        may do (the page renders this; the script never works it out)."""
        if self.kind in self.DECLARES and self.decisions:
            return False
        return self.outcome("approve") == self.Status.ACCEPTED

    @property
    def commented_approve_accepts(self) -> bool:
        """Approving with a comment still accepts (an approval's comment is only a note; a
        loop gate's feedback asks for another iteration)."""
        if self.kind in self.DECLARES and self.decisions:
            return False
        return self.outcome("approve", "feedback") == self.Status.ACCEPTED

    def approve_label_for(self, comment: str = "") -> str:
        """What the primary button says when the reviewer has written `comment`."""
        if self.kind in self.DECLARES:
            return "Approve"
        accepts = self.outcome("approve", comment) == self.Status.ACCEPTED
        return "Accept & complete" if accepts else "Continue"

    @property
    def approve_label(self) -> str:
        return self.approve_label_for("")

    @property
    def approve_label_with_feedback(self) -> str:
        return self.approve_label_for("feedback")

    def decide(
        self, run, actor, action: str, comment="", decision="", *, status=None, digest=""
    ) -> str:
        """Record `actor`'s decision if the gate is still pending (the caller holds the
        run's lock) and return its outcome; AlreadyDecided if someone was first. A `status`
        given is a decision already checked against `offered_decisions` (runs.decisions);
        `digest`: what it was made on."""
        comment = (comment or "").strip()
        if len(comment) > COMMENT_LIMIT:
            raise ServiceError(
                f"Feedback is limited to {COMMENT_LIMIT:,} characters; this has {len(comment):,}."
            )
        if status is None:
            self._check_decision(action, decision)
        if action == "reject" and not comment and self.status == self.Status.PENDING:
            # Every surface (console, API, CLI, MCP) asks for it: the run shows it afterwards.
            raise ServiceError(REJECT_NEEDS_A_REASON)
        status = status or self.outcome(action, comment)
        fields = {
            "status": status,
            "comment": comment,
            "decision": decision,
            "decided_by": actor.person,
            "decided_by_name": actor.name,
            "decided_at": timezone.now(),
            "surface": actor.surface,
        }
        if not Gate.objects.filter(pk=self.pk, status=self.Status.PENDING).update(**fields):
            self.refresh_from_db()
            raise AlreadyDecided(self)
        for name, value in fields.items():
            setattr(self, name, value)
        answered = self.answered_id()
        self.respond_as(run, actor, answered, comment, digest, closed=True)
        run.append_event(
            "gate_decided",
            self.node_id,
            gate=self.pk,
            status=status,
            by=actor.name,
            surface=actor.surface,
            comment=comment,
            decision=decision,
            answered=answered,
            digest=digest or None,
            iteration=self.iteration_number,
        )
        return status

    def _check_decision(self, action: str, decision: str) -> None:
        """The older verbs' rule (approve with a `decision`, reject): a declared gate's
        approval names one of its decisions; a gate that declares none takes none."""
        if action == "approve" and self.kind == self.Kind.LOOP and self.decisions:
            ids = ", ".join(d["id"] for d in self.decisions)
            raise ServiceError(f"This gate declares its decisions: respond with one of {ids}.")
        if action == "approve" and self.kind in self.DECLARES and self.decisions:
            ids = [d["id"] for d in self.decisions]
            if decision not in ids:
                raise ServiceError(f"Choose one of the decisions: {', '.join(ids)}.")
        elif decision:
            raise ServiceError("This gate declares no decisions.")

    def answered_id(self) -> str:
        """The id of the offered decision this gate's outcome was: its declared decision,
        else the one of the default set its status means."""
        if self.decision:
            return self.decision
        for offered in self.offered_decisions:
            if THEN_STATUS.get(offered["then"]) == self.status:
                return offered["id"]
        return self.status

    def respond_as(self, run, actor, answered: str, text: str, digest: str, *, closed: bool):
        return GateResponse.objects.create(
            gate=self,
            run=run,
            decision=answered,
            text=text,
            by=actor.person,
            by_name=actor.name,
            via=actor.surface,
            digest=digest or "",
            closed_gate=closed,
        )

    @property
    def result(self) -> dict:
        """The structured result later nodes route on (`$gate.output.decision`)."""
        return {
            "decision": self.answered_id(),
            "text": self.comment,
            "by": self.decider,
            "via": self.surface,
        }

    def wait_decided(self, *, every: float, still_ours) -> "Gate":
        """Block until this gate is decided or cancelled (a process that holds the run's
        work while a person decides: a script). Wakes on the run's live events and at
        least every `every` seconds, re-reading the gate each time; `still_ours()` runs at
        each wake and raises to stop waiting (the work was cancelled or taken over)."""
        from runs import live

        waiter = live.Waiter(self.run_id)
        try:
            while True:
                if not Gate.objects.filter(pk=self.pk, status=self.Status.PENDING).exists():
                    self.refresh_from_db()
                    return self
                still_ours()
                waiter.wait(every)
        finally:
            waiter.close()

    def as_dict(self) -> dict:
        return {
            **self._decision_dict(),
            # What a decision made now is made on (the digest of what the gate shows now).
            "digest": self.digest_now if self.is_pending else self.digest,
            "id": self.pk,
            "node": self.node_id,
            "iteration": self.iteration_number,
            "kind": self.kind,
            "message": self.message,
            "completion_signaled": self.completion_signaled,
            "empty_approve_completes": self.empty_approve_completes,
            "status": self.status,
            "decisions": self.decisions,
            "comment": self.comment,
            "decision": self.decision,
            "decided_by": self.decider or None,
            "decided_at": self.decided_at.isoformat() if self.decided_at else None,
            "surface": self.surface,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "deadline_at": self.deadline_at.isoformat() if self.deadline_at else None,
            "on_timeout": self.on_timeout or None,
            "on_timeout_words": self.on_timeout_words or None,
            "reminded_at": self.reminded_at.isoformat() if self.reminded_at else None,
            "escalate_to": self.escalate_to,
            "escalated_at": self.escalated_at.isoformat() if self.escalated_at else None,
            "timeout_decision": self.timeout_decision or None,
        }

    def _decision_dict(self) -> dict:
        approvals = [
            {"by": r.by_name, "decision": r.decision, "via": r.via, "at": r.at.isoformat()}
            for r in self.partial_approvals()
        ]
        return {
            "offered_decisions": self.offered_decisions,
            "approvals_needed": self.approvals_needed,
            "approvals": approvals,
            "result": None if self.is_pending else self.result,
        }

    # --- the deadline: what the sweep does when nobody decided in time -------------------

    @property
    def is_overdue(self) -> bool:
        return self.deadline_at is not None and self.deadline_at <= timezone.now()

    @property
    def on_timeout_words(self) -> str:
        """What happens at the deadline, as the gate panel and the inbox say it."""
        if self.escalate_to and self.escalated_at is None:
            return f"it is escalated to {', '.join(self.escalate_to)}"
        if self.timeout_decision:
            offered = {d["id"]: d["label"] for d in self.offered_decisions}
            label = offered.get(self.timeout_decision, self.timeout_decision)
            return f"the deadline decides “{label}”"
        return {
            self.OnTimeout.REMIND: "a reminder is sent",
            self.OnTimeout.REJECT: "the sweep rejects it",
            self.OnTimeout.FAIL: "the sweep fails the run",
        }.get(self.on_timeout, "")

    def remind(self, run, actor, now) -> bool:
        """Record the one reminder this deadline gets (a conditional UPDATE: of two
        sweepers, one sends it) and announce it."""
        from runs import signals

        claimed = Gate.objects.filter(
            pk=self.pk, status=self.Status.PENDING, reminded_at__isnull=True
        ).update(reminded_at=now)
        if not claimed:
            return False
        self.reminded_at = now
        run.append_event(
            "gate_reminded",
            self.node_id,
            gate=self.pk,
            iteration=self.iteration_number,
            waited_seconds=int((now - self.created_at).total_seconds()),
            by=actor.name,
            surface=actor.surface,
        )
        signals.gate_reminded.send(Gate, run=run, gate=self, now=now)
        return True

    def escalate(self, run, actor, now) -> bool:
        """At the first deadline, tell `escalate_to` and start the second deadline,
        `escalate_seconds` from now, at which `on_timeout` (or `timeout_decision`) acts.
        Claimed by a conditional UPDATE: of two sweepers, one escalates."""
        from runs import signals

        deadline = now + timedelta(seconds=self.escalate_seconds or 0)
        claimed = Gate.objects.filter(
            pk=self.pk, status=self.Status.PENDING, escalated_at__isnull=True
        ).update(escalated_at=now, deadline_at=deadline)
        if not claimed:
            return False
        self.escalated_at, self.deadline_at = now, deadline
        run.append_event(
            "gate_escalated",
            self.node_id,
            gate=self.pk,
            iteration=self.iteration_number,
            to=list(self.escalate_to),
            deadline=deadline.isoformat(),
            after_seconds=self.escalate_seconds,
            waited_seconds=int((now - self.created_at).total_seconds()),
            then=self.on_timeout_words,
            by=actor.name,
            surface=actor.surface,
        )
        signals.gate_escalated.send(Gate, run=run, gate=self, now=now)
        return True

    def time_out(self, run, actor, now, reason: str) -> bool:
        """Close the gate as timed out (on_timeout: fail); the caller then fails the run."""
        fields = {
            "status": self.Status.TIMED_OUT,
            "comment": reason,
            "decided_by": None,
            "decided_by_name": actor.name,
            "decided_at": now,
            "surface": actor.surface,
        }
        if not Gate.objects.filter(pk=self.pk, status=self.Status.PENDING).update(**fields):
            return False
        for name, value in fields.items():
            setattr(self, name, value)
        run.append_event(
            "gate_decided",
            self.node_id,
            gate=self.pk,
            status=self.Status.TIMED_OUT,
            by=actor.name,
            surface=actor.surface,
            comment=reason,
            decision="",
        )
        return True


class GateResponse(models.Model):
    """One person's answer at a gate, whatever it led to: the decision that closed it, or
    one approval of a quorum still short. The audit reads these (who, what, on which
    digest, from where)."""

    gate = models.ForeignKey(Gate, on_delete=models.CASCADE, related_name="responses")
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="gate_responses")
    decision = models.CharField(max_length=100)
    text = models.TextField(blank=True)
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    by_name = models.CharField(max_length=150)
    via = models.CharField(max_length=20, choices=Gate.Surface.choices)
    digest = models.CharField(max_length=64, blank=True)
    # True when this answer decided the gate; False for an approval a quorum still counts.
    closed_gate = models.BooleanField(default=False)
    at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self):
        return f"{self.by_name}: {self.decision} at gate {self.gate_id}"

    def as_dict(self) -> dict:
        return {
            "run": self.run_id,
            "gate": self.gate_id,
            "decision": self.decision,
            "text": self.text,
            "by": self.by_name,
            "via": self.via,
            "digest": self.digest,
            "closed_gate": self.closed_gate,
            "at": self.at.isoformat(),
        }
