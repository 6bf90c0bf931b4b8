"""Announcing what happened: the kernel's signals (runs.signals) say where it happens (a
gate opens in `NodeRun.pause`, the sweep reminds in `Gate.remind`, a run ends in
`Run.set_status`), inside that change's transaction; the receivers below, connected in
`NotificationsConfig.ready()`, `announce` it. One query finds who listens; with nobody
listening nothing else is done."""

from __future__ import annotations

from django.conf import settings
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from runs import dispatch
from runs.engine.durations import say_duration

from .models import EVENTS, SEND_TASK, Delivery, Subscription

SUMMARY_LIMIT = 300
# An escalation's event: not one a subscription hears (EVENTS); the recipe names who.
ESCALATED = "gate_escalated"


def absolute(path: str) -> str:
    return settings.LOOP_BASE_URL.rstrip("/") + path


def gate_url(gate) -> str:
    return absolute(reverse("gate_detail", args=[gate.run_id, gate.pk]))


def _short(text: str) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= SUMMARY_LIMIT else text[: SUMMARY_LIMIT - 1] + "…"


def summary(event: str, run, gate=None, now=None) -> str:
    """One sentence a person reads in an e-mail subject or a chat message."""
    now = now or timezone.now()
    what = f"Run {run.pk} ({run.recipe.slug})"
    if gate is not None:
        where = gate.node_id + (f", iteration {gate.iteration_number}" if gate.iteration_id else "")
        if event in ("gate_reminder", ESCALATED):
            waited = say_duration((now - gate.created_at).total_seconds())
            first = "Escalated to you" if event == ESCALATED else "Reminder"
            return f"{first}: {what} has waited {waited} for a decision at {where}."
        text = f"{what} waits for a decision at {where}."
        if gate.deadline_at:
            text += f" Decide within {say_duration(gate.timeout_seconds or 0)}."
        return text
    if event == "run_failed":
        return _short(f"{what} failed: {run.error}" if run.error else f"{what} failed.")
    return f"{what} completed."


def payload(event: str, run, gate=None, now=None) -> dict:
    now = now or timezone.now()
    body = {
        "event": event,
        "summary": summary(event, run, gate, now),
        "at": now.isoformat(),
        "run": {
            "id": run.pk,
            "recipe": run.recipe.slug,
            "status": run.status_word,
            "starter": run.starter,  # who started it, as every page says (a schedule, too)
            "url": absolute(run.get_absolute_url()),
        },
        "gate": None,
    }
    if gate is not None:
        body["gate"] = {
            "id": gate.pk,
            "node": gate.node_id,
            "kind": gate.kind,
            "iteration": gate.iteration_number,
            "waiting_since": gate.created_at.isoformat(),
            "deadline": gate.deadline_at.isoformat() if gate.deadline_at else None,
            "on_timeout": gate.on_timeout or None,
            # The page where a signed-in person decides (by POST); never a decision link.
            "url": gate_url(gate),
        }
    return body


def announce(run, event: str, gate=None, now=None) -> int:
    """Record a delivery for each subscription listening to `event` on `run` and send
    each once the transaction commits. Returns how many were recorded."""
    assert event in EVENTS, event
    listeners = list(Subscription.listening(event, run))
    if not listeners:
        return 0
    body = payload(event, run, gate, now)
    now = timezone.now()
    for sub in listeners:
        delivery = Delivery.objects.create(
            subscription=sub, event=event, run=run, gate=gate, payload=body, next_attempt_at=now
        )
        dispatch.send_on_commit(SEND_TASK, delivery.pk)
    return len(listeners)


def run_ended(sender, *, run, status, **_) -> None:
    """A run completed or failed (other terminal statuses are no event one subscribes to)."""
    if f"run_{status}" in EVENTS:
        announce(run, f"run_{status}")


def gate_opened(sender, *, run, gate, **_) -> None:
    announce(run, "gate_waiting", gate=gate)


def gate_reminded(sender, *, run, gate, now, **_) -> None:
    announce(run, "gate_reminder", gate=gate, now=now)


def gate_escalated(sender, *, run, gate, now, **_) -> None:
    """A gate's first deadline passed: mail each person its `escalate_to` names who may
    decide in the run's project, with their own decision links (made when the mail is
    sent). They subscribed to nothing, so each delivery names its recipient instead of a
    subscription."""
    people = escalation_recipients(gate.escalate_to, run)
    if not people:
        return
    body = payload(ESCALATED, run, gate, now)
    for person in people:
        delivery = Delivery.objects.create(
            recipient=person,
            event=ESCALATED,
            run=run,
            gate=gate,
            payload=body,
            next_attempt_at=timezone.now(),
        )
        dispatch.send_on_commit(SEND_TASK, delivery.pk)


def escalation_recipients(names, run) -> list:
    """The active people with an e-mail address and the operator role in `run`'s project
    among the members of the groups `names` names and the accounts it names, each once, by
    username. (A group named here is a way to name people, not a role: each person's role
    in the project is what counts.)"""
    from django.contrib.auth import get_user_model

    names = [str(name) for name in names or []]
    people = (
        get_user_model()
        .objects.filter(Q(groups__name__in=names) | Q(username__in=names), is_active=True)
        .exclude(email="")
        .distinct()
        .order_by("username")
    )
    return [person for person in people if person.has_perm("runs.operate_run", run)]
