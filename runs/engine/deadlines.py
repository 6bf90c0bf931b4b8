"""A gate's deadline as a recipe declares it: `gate_timeout` (a duration) and `on_timeout`.
Pure (no Django), so the Python recipe API checks its gate option with the same rules.

Every loop kind opens gates through `NodeRun.pause(..., deadline=GateDeadline(...))`; the
sweep's `overdue_gates` pass then reminds, rejects or fails when nobody decided in time.
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class GateDeadline:
    seconds: int
    on_timeout: str = DEFAULT_ON_TIMEOUT

    def __post_init__(self):
        if problem := on_timeout_problem(self.on_timeout):
            raise ValueError(problem)

    @classmethod
    def parse(cls, gate_timeout, on_timeout=None) -> GateDeadline | None:
        """From the values a recipe wrote; None when there is no gate_timeout."""
        if gate_timeout is None:
            return None
        if isinstance(gate_timeout, timedelta):
            seconds = int(gate_timeout.total_seconds())
            if seconds <= 0:
                raise DurationError("gate_timeout must be longer than zero")
        else:
            seconds = parse_duration(gate_timeout)
        return cls(seconds, on_timeout or DEFAULT_ON_TIMEOUT)

    @classmethod
    def of(cls, block) -> GateDeadline | None:
        """The deadline a spec block (a loop, loop_group or approval) declares."""
        if block is None:
            return None
        return cls.parse(getattr(block, "gate_timeout", None), getattr(block, "on_timeout", None))

    def gate_fields(self, now) -> dict:
        return {
            "deadline_at": now + timedelta(seconds=self.seconds),
            "timeout_seconds": self.seconds,
            "on_timeout": self.on_timeout,
        }

    @property
    def words(self) -> str:
        return say_duration(self.seconds)
