"""What a request to change a run can be refused with; every surface maps these the same
way (the API to a status code, the console to a message, the CLI to an error line)."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone


class ServiceError(Exception):
    status = 400


class NotAllowed(ServiceError):
    status = 403


class StarterCannotApprove(NotAllowed):
    """`approvers: others`: the person who started the run asked to accept at its gate."""


class NotFound(ServiceError):
    status = 404


class Conflict(ServiceError):
    status = 409


class AlreadyDecided(Conflict):
    def __init__(self, gate):
        when = (
            timezone.localtime(gate.decided_at).strftime("%Y-%m-%d %H:%M:%S")
            if gate.decided_at
            else "earlier"
        )
        super().__init__(
            f"This gate was already decided by {gate.decider} at {when} ({gate.status})."
        )
        self.gate = gate


class UnknownDecision(ServiceError):
    """A decision id the gate does not offer; the message lists the ones it does."""

    status = 422


class StaleReview(Conflict):
    """A decision made on other content than the gate shows now (runs.review)."""

    def __init__(self, changed: list[str]):
        said = ", ".join(changed) if changed else "what the gate shows"
        super().__init__(f"What you reviewed has changed since ({said}): look again, then decide.")
        self.changed = changed


@dataclass
class InputError(ServiceError):
    errors: dict

    def __post_init__(self):
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.errors.items()))

    status = 422
