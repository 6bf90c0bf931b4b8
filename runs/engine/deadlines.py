"""A gate's deadline as a recipe declares it: `gate_timeout` (a duration) and `on_timeout`,
and optionally an escalation (`escalate_to`, `escalate_after`: at the first deadline a
second group is told and a second deadline starts) and a declared decision the deadline
takes instead of `on_timeout` (`timeout_decision`). Pure (no Django), so the workflow's and
the step machine's format rules and the Python recipe API check them with the same rules.

Every loop kind opens gates through `NodeRun.pause(..., deadline=GateDeadline(...))`; the
sweep's `overdue_gates` pass then escalates, reminds, rejects, fails or takes the timeout's
decision when nobody decided in time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

from runs.engine.durations import DurationError, parse_duration, say_duration

ON_TIMEOUT = ("remind", "reject", "fail")
DEFAULT_ON_TIMEOUT = "remind"
NEVER_APPROVE = (
    "on_timeout: approve is not allowed: a deadline never decides for a person; "
    "use remind, reject or fail"
)


def on_timeout_problem(value) -> str | None:
    """Why `on_timeout: value` is refused, or None."""
    if value is None or value in ON_TIMEOUT:
        return None
    if isinstance(value, str) and value.strip().lower() in ("approve", "accept", "approved"):
        return NEVER_APPROVE
    return f"on_timeout must be one of {', '.join(ON_TIMEOUT)}, not {value!r}"


# A decision the deadline may never take: one that completes, approves or ships. Its
# `then` says so, or (an approval's decisions have no `then`) its id or label reads so.
APPROVING_THEN = ("complete", "approve")
APPROVING_WORDS = frozenset(
    "approve approved accept accepted ship shipped merge merged complete completed".split()
)
# The longest group or user name Django keeps.
NAME_LIMIT = 150


def _seconds(value, name: str) -> int:
    """Seconds in a duration as a recipe writes it, or in a timedelta (the Python API)."""
    if isinstance(value, timedelta):
        seconds = int(value.total_seconds())
        if seconds <= 0:
            raise DurationError(f"{name} must be longer than zero")
        return seconds
    return parse_duration(value)


def escalation_names(value) -> tuple[str, ...]:
    """The group or user names `escalate_to` gives (one name or a list of them), in order,
    once each; ValueError says what is wrong."""
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
        raise ValueError("escalate_to must be a group or user name, or a list of them")
    cleaned = [name.strip() for name in names]
    if not cleaned or not all(cleaned):
        raise ValueError("escalate_to must name at least one group or user, none blank")
    if too_long := [name for name in cleaned if len(name) > NAME_LIMIT]:
        raise ValueError(f"escalate_to name {too_long[0][:40]!r}... is longer than {NAME_LIMIT}")
    return tuple(dict.fromkeys(cleaned))


def escalation_problems(gate_timeout, escalate_to, escalate_after) -> list[tuple[str, str]]:
    """Why `escalate_to` / `escalate_after` are refused, each as (the field to point at,
    why); none when they are right or absent. `escalate_after` is the second deadline,
    counted from the escalation: the two go together, and need the first (gate_timeout)."""
    problems = []
    if escalate_to is not None:
        try:
            escalation_names(escalate_to)
        except ValueError as exc:
            problems.append(("escalate_to", str(exc)))
        if gate_timeout is None:
            problems.append(
                ("escalate_to", "escalate_to needs a gate_timeout (when they are told)")
            )
        if escalate_after is None:
            problems.append(
                (
                    "escalate_to",
                    "escalate_to needs escalate_after (how long they have to decide before "
                    "on_timeout acts)",
                )
            )
    if escalate_after is not None:
        try:
            _seconds(escalate_after, "escalate_after")
        except DurationError as exc:
            problems.append(("escalate_after", f"escalate_after {exc}"))
        if escalate_to is None:
            problems.append(("escalate_after", "escalate_after needs escalate_to (whom to tell)"))
    return problems


def _decision_fields(choice) -> dict:
    """A declared decision as {id, label, then}: written as a string, a mapping, or a
    spec's model."""
    if isinstance(choice, str):
        return {"id": choice, "label": choice, "then": None}
    get = choice.get if isinstance(choice, dict) else lambda name: getattr(choice, name, None)
    ident = get("id")
    return {"id": ident, "label": get("label") or ident, "then": get("then")}


def approving(choice) -> bool:
    """Whether a declared decision completes, approves or ships (what a deadline never
    decides): its `then` says so, or its id or label reads so."""
    fields = _decision_fields(choice)
    if fields["then"] in APPROVING_THEN:
        return True
    words = re.findall(r"[a-z]+", f"{fields['id']} {fields['label']}".lower())
    return any(word in APPROVING_WORDS for word in words)


def timeout_decision_problem(value, decisions, *, gate_timeout, on_timeout=None) -> str | None:
    """Why `timeout_decision: value` is refused, or None: it must name one of the gate's
    declared `decisions` that neither completes, approves nor ships, and it takes the
    place of on_timeout at the (last) deadline."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        return "timeout_decision must name one of the gate's declared decisions"
    declared = [_decision_fields(choice) for choice in decisions or []]
    choice = next((fields for fields in declared if fields["id"] == value), None)
    if choice is None:
        ids = ", ".join(str(fields["id"]) for fields in declared) or "none"
        return (
            f"timeout_decision {value!r} is not one of this gate's declared decisions "
            f"(declared: {ids})"
        )
    if approving(choice):
        return (
            f"timeout_decision {value!r} completes, approves or ships: a deadline never "
            "decides for a person; name a decision that holds, iterates or fails"
        )
    if gate_timeout is None:
        return "timeout_decision needs a gate_timeout (how long the gate waits)"
    if on_timeout is not None:
        return "timeout_decision takes the place of on_timeout: write one of them"
    return None


@dataclass(frozen=True)
class GateDeadline:
    seconds: int
    on_timeout: str = DEFAULT_ON_TIMEOUT
    # Told at the first deadline, which then moves on by escalate_seconds.
    escalate_to: tuple[str, ...] = ()
    escalate_seconds: int | None = None
    # A declared decision the (last) deadline takes instead of on_timeout.
    timeout_decision: str = ""

    def __post_init__(self):
        if problem := on_timeout_problem(self.on_timeout):
            raise ValueError(problem)
        if bool(self.escalate_to) != (self.escalate_seconds is not None):
            raise ValueError("escalate_to and escalate_after go together")

    @classmethod
    def parse(
        cls,
        gate_timeout,
        on_timeout=None,
        *,
        escalate_to=None,
        escalate_after=None,
        timeout_decision=None,
    ) -> GateDeadline | None:
        """From the values a recipe wrote; None when there is no gate_timeout."""
        if problems := escalation_problems(gate_timeout, escalate_to, escalate_after):
            raise ValueError(problems[0][1])
        if gate_timeout is None:
            return None
        return cls(
            _seconds(gate_timeout, "gate_timeout"),
            on_timeout or DEFAULT_ON_TIMEOUT,
            escalation_names(escalate_to) if escalate_to is not None else (),
            _seconds(escalate_after, "escalate_after") if escalate_after is not None else None,
            timeout_decision or "",
        )

    @classmethod
    def of(cls, block) -> GateDeadline | None:
        """The deadline a spec block (a loop, loop_group, approval or human.wait) declares."""
        if block is None:
            return None
        return cls.parse(
            getattr(block, "gate_timeout", None),
            getattr(block, "on_timeout", None),
            escalate_to=getattr(block, "escalate_to", None),
            escalate_after=getattr(block, "escalate_after", None),
            timeout_decision=getattr(block, "timeout_decision", None),
        )

    def gate_fields(self, now) -> dict:
        return {
            "deadline_at": now + timedelta(seconds=self.seconds),
            "timeout_seconds": self.seconds,
            "on_timeout": self.on_timeout,
            "escalate_to": list(self.escalate_to),
            "escalate_seconds": self.escalate_seconds,
            "timeout_decision": self.timeout_decision,
        }

    @property
    def words(self) -> str:
        return say_duration(self.seconds)
