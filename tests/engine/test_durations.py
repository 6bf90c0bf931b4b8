"""Durations in recipes (`gate_timeout`) and deadlines' rules, without a database."""

import pytest

from runs.engine.deadlines import NEVER_APPROVE, GateDeadline, on_timeout_problem
from runs.engine.durations import DurationError, parse_duration, say_duration


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("90s", 90),
        ("30m", 1800),
        ("2h", 7200),
        ("1d", 86400),
        ("1h30m", 5400),
        ("1w", 604800),
        (" 2H ", 7200),
        ("1d 12h", 129600),
    ],
)
def test_durations_people_write(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "value, words",
    [
        (30, "has no unit"),
        ("30", "is not a duration"),
        ("2 hours", "is not a duration"),
        ("30m2h", "larger units first"),
        ("0m", "longer than zero"),
        ("400d", "longer than a year"),
        ("", "must be text"),
        (True, "has no unit"),
    ],
)
def test_what_is_not_a_duration(value, words):
    with pytest.raises(DurationError, match=words):
        parse_duration(value)


@pytest.mark.parametrize(
    "seconds, words",
    [
        (45, "45 seconds"),
        (7202, "2 hours"),
        (5400, "1 hour 30 minutes"),
        (97200, "1 day 3 hours"),
        (60, "1 minute"),
        (0, "0 seconds"),
    ],
)
def test_durations_said_back(seconds, words):
    assert say_duration(seconds) == words


def test_on_timeout_never_approves():
    assert on_timeout_problem("approve") == NEVER_APPROVE
    assert on_timeout_problem("Accept") == NEVER_APPROVE
    assert "must be one of remind, reject, fail" in on_timeout_problem("ignore")
    assert on_timeout_problem("fail") is None
    with pytest.raises(ValueError, match="never decides for a person"):
        GateDeadline(60, "approve")
    assert GateDeadline.parse("2h") == GateDeadline(7200, "remind")
    assert GateDeadline.parse(None) is None
