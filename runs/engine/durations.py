"""Durations people write in recipes (`gate_timeout: 2h`), read and said back in words.

A duration is one or more number-and-unit parts, largest first: `90s`, `30m`, `2h`, `1d`,
`1h30m`. A bare number is refused: nobody can tell whether `30` means seconds or minutes.
"""

from __future__ import annotations

import re

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
WORDS = (("week", 7 * 86400), ("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))
_PART = re.compile(r"(\d{1,6})\s*([smhdw])")
# A deadline longer than a year is a typo, not a plan.
LONGEST = 366 * 86400
EXAMPLES = "e.g. 90s, 30m, 2h, 1d or 1h30m"


class DurationError(ValueError):
    pass


def parse_duration(value) -> int:
    """Seconds in `value` (a string such as '1h30m'); DurationError says what is wrong."""
    if isinstance(value, bool) or isinstance(value, int | float):
        raise DurationError(f"{value!r} has no unit: write a number and a unit ({EXAMPLES})")
    if not isinstance(value, str) or not value.strip():
        raise DurationError(f"a duration must be text such as {EXAMPLES}")
    text = value.strip().lower().replace(" ", "")
    position, total, seen = 0, 0, []
    for match in _PART.finditer(text):
        if match.start() != position:
            break
        unit = match.group(2)
        if seen and UNITS[unit] >= UNITS[seen[-1]]:
            raise DurationError(f"{value!r}: write the larger units first ({EXAMPLES})")
        seen.append(unit)
        total += int(match.group(1)) * UNITS[unit]
        position = match.end()
    if position != len(text) or not seen:
        raise DurationError(f"{value!r} is not a duration ({EXAMPLES})")
    if total <= 0:
        raise DurationError(f"{value!r} must be longer than zero")
    if total > LONGEST:
        raise DurationError(f"{value!r} is longer than a year")
    return total


def say_duration(seconds: int | float) -> str:
    """'2 hours', '1 day 3 hours', '1 hour 30 minutes', '45 seconds': the largest unit and,
    when there is some, the one just below it ('2 hours', not '2 hours 2 seconds')."""
    seconds = int(seconds)
    if seconds <= 0:
        return "0 seconds"
    counts = []
    for word, size in WORDS:
        count, seconds = divmod(seconds, size)
        counts.append((word, count))
    first = next(i for i, (_, count) in enumerate(counts) if count)
    parts = [(w, c) for w, c in counts[first : first + 2] if c]
    return " ".join(f"{c} {w}{'' if c == 1 else 's'}" for w, c in parts)
