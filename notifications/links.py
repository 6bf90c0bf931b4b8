"""Signed decision links: one per offered decision, for one named person, in a mail.

The URL carries `django.core.signing` token naming a `DecisionLink` row (salted, so no other
signed value of the console reads as one; another install's key fails the signature).
The row is what makes a link single-use (`DecisionLink.use`, a conditional UPDATE),
revocable and expiring. Opening a link never decides (mail scanners open links): the page
asks to confirm, and the POST decides through `respond` as the link's recipient, who must
still hold the operator role in the run's project, on the digest the link was made for."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.core import signing
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from runs import review, services
from runs.actor import Actor
from runs.errors import StaleReview
from runs.models import Gate

from .events import absolute
from .models import DecisionLink

SALT = "notifications.decision-link"
# The events whose mail carries links: a gate waits, its deadline passed, it was escalated.
LINKED_EVENTS = ("gate_waiting", "gate_reminder", "gate_escalated")
# A gate that closed with nobody's decision: its run was cancelled, or its deadline failed it.
CLOSED_UNDECIDED = (Gate.Status.CANCELLED, Gate.Status.TIMED_OUT)


@dataclass(frozen=True)
class Refusal:
    """Why a link cannot decide, as the page says it (with its HTTP status)."""

    status: int
    title: str
    reason: str
    changed: list[str] = field(default_factory=list)


class LinkRefused(Exception):
    def __init__(self, refusal: Refusal):
        super().__init__(refusal.reason)
        self.refusal = refusal


NOT_OURS = Refusal(
    404,
    "This link is not valid",
    "It was not made by this console, or it was changed on the way (one character is enough). "
    "Open the gate from the run's page instead.",
)


def token_for(link: DecisionLink) -> str:
    return signing.dumps(link.pk, salt=SALT)


def url_for(link: DecisionLink) -> str:
    return absolute(reverse("decision_link", args=[token_for(link)]))


def expiry(gate, now) -> timezone.datetime:
    """LOOP_DECISION_LINK_HOURS from now, or the gate's deadline if sooner (a deadline
    already past — a reminder of a gate that keeps waiting — does not end it)."""
    ends = now + timedelta(hours=settings.LOOP_DECISION_LINK_HOURS)
    if gate.deadline_at and now < gate.deadline_at < ends:
        return gate.deadline_at
    return ends


def may_decide(user, gate) -> bool:
    """Whether `user` may decide `gate` by a link: an active person with the operator role
    in its run's project (console.projects), as `respond` will ask again."""
    return user is not None and user.is_active and user.has_perm("runs.operate_run", gate.run)


def links_for(gate, user, *, delivery=None, now=None) -> list[tuple[dict, str]]:
    """One link per decision the gate offers, made for `user`: (the decision, its URL).
    None for a person who may not operate in the run's project or a gate no longer
    waiting. A delivery tried again reuses the links it made the first time rather than
    making more."""
    if not gate.is_pending or not may_decide(user, gate):
        return []
    now = now or timezone.now()
    made = {}
    if delivery is not None:
        made = {link.decision: link for link in delivery.links.filter(recipient=user)}
    found = []
    for choice in gate.offered_decisions:
        link = made.get(choice["id"]) or DecisionLink.objects.create(
            gate=gate,
            decision=choice["id"],
            recipient=user,
            digest=gate.digest,
            delivery=delivery,
            created_at=now,
            expires_at=expiry(gate, now),
        )
        found.append((choice, url_for(link)))
    return found


def mail_lines(gate, user, *, delivery=None) -> str:
    """The part of a mail that decides: one line per decision, or "" without links."""
    found = links_for(gate, user, delivery=delivery)
    if not found:
        return ""
    lines = [f"  {choice['label']}: {url}" for choice, url in found]
    return (
        f"Decide from here, as {user.get_username()}:\n"
        + "\n".join(lines)
        + "\n\nEach link opens a page that asks you to confirm; it decides once, only as you, "
        f"within {settings.LOOP_DECISION_LINK_HOURS} hours (or the gate's deadline), and "
        "not at all if what the gate shows has changed since.\n\n"
    )


def open_link(token: str) -> DecisionLink:
    """The link a token names; LinkRefused when the signature fails or the row is gone."""
    try:
        pk = signing.loads(token, salt=SALT)
    except signing.BadSignature:
        raise LinkRefused(NOT_OURS) from None
    link = (
        DecisionLink.objects.select_related("gate__run__recipe", "gate__iteration", "recipient")
        .filter(pk=pk)
        .first()
    )
    if link is None:
        raise LinkRefused(NOT_OURS)
    return link


def decision_of(link: DecisionLink) -> dict | None:
    """The offered decision the link stands for (None once the gate no longer offers it)."""
    return next((d for d in link.gate.offered_decisions if d["id"] == link.decision), None)


def decision_link_problem(link: DecisionLink, now=None) -> Refusal | None:
    """Why `link` cannot decide now, without looking at content (see `stale_problem`)."""
    now = now or timezone.now()
    gate, run = link.gate, link.gate.run
    if link.used_at:
        when = _when(link.used_at)
        return Refusal(410, "This link was used", f"It decided once, at {when}; it cannot again.")
    if link.revoked_at:
        return Refusal(410, "This link was revoked", f"It was revoked at {_when(link.revoked_at)}.")
    if gate.status in CLOSED_UNDECIDED or (gate.is_pending and run.is_terminal):
        return Refusal(
            409,
            "This gate no longer waits",
            f"It closed without a decision ({gate.status}); run {run.pk} is {run.status_word}.",
        )
    if not gate.is_pending:
        decided = f"{gate.decision_label or gate.status} by {gate.decider or 'the console'}"
        return Refusal(409, "This gate was already decided", f"It was decided: {decided}.")
    if link.expires_at <= now:
        return Refusal(410, "This link has expired", f"It expired at {_when(link.expires_at)}.")
    if not may_decide(link.recipient, gate):
        return Refusal(
            403,
            "You may no longer decide",
            f"This link was made for {link.recipient.get_username()}, who no longer holds "
            "the operator role in this run's project.",
        )
    if decision_of(link) is None:
        return Refusal(409, "This decision is no longer offered", "Open the gate instead.")
    return None


def stale_problem(link: DecisionLink) -> Refusal | None:
    """Refused when what the gate shows changed since the link was made."""
    try:
        review.check(link.gate.run, link.gate, link.digest)
    except StaleReview as stale:
        return stale_refusal(stale)
    return None


def stale_refusal(stale: StaleReview) -> Refusal:
    return Refusal(
        409,
        "What you were asked about has changed",
        "The gate shows other content than when this link was sent, so it no longer "
        "decides. Look at the gate again, then decide there.",
        changed=list(stale.changed),
    )


def decide(link: DecisionLink, text: str = ""):
    """Spend the link and decide as its recipient, in one transaction: a decision refused
    (a stale digest, text missing, someone was first) leaves the link unspent and the
    caller gets the ServiceError; LinkRefused when the link itself cannot."""
    if problem := decision_link_problem(link):
        raise LinkRefused(problem)
    with transaction.atomic():
        if not link.use():
            link.refresh_from_db()
            raise LinkRefused(decision_link_problem(link) or NOT_OURS)
        actor = Actor.operator(link.recipient, "link")
        try:
            return services.respond(
                link.gate_id, actor, link.decision, text=text, digest=link.digest
            )
        except StaleReview as stale:
            raise LinkRefused(stale_refusal(stale)) from None


def revoke_all_for(user, now=None) -> int:
    """Revoke every live link made for `user` (their mailbox was lost, they left)."""
    return DecisionLink.objects.filter(recipient=user).revoke(now)


def _when(moment) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M %Z")
