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


@dataclass
class InputError(ServiceError):
    errors: dict

    def __post_init__(self):
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.errors.items()))

    status = 422
