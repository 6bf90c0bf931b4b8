"""Stop conditions: `condition(result, iteration) -> bool`, composable with `&` and `|`.

Any callable of that shape works as a `stop_condition`; wrapping it in `StopCondition`
(the ready-made ones already are) lets it compose with others and gives it a readable name.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .results import AgentResult

Condition = Callable[[AgentResult, int], bool]


class StopCondition:
    def __init__(self, check: Condition, description: str = ""):
        if not callable(check):
            raise TypeError("a stop condition must be callable as condition(result, iteration)")
        self.check = check
        self.description = description or getattr(check, "__name__", "condition")

    def __call__(self, result: AgentResult, iteration: int) -> bool:
        return bool(self.check(result, iteration))

    def __and__(self, other: Condition) -> StopCondition:
        right = as_condition(other)
        return StopCondition(lambda r, i: self(r, i) and right(r, i), f"({self} and {right})")

    def __or__(self, other: Condition) -> StopCondition:
        right = as_condition(other)
        return StopCondition(lambda r, i: self(r, i) or right(r, i), f"({self} or {right})")

    def __rand__(self, other: Condition) -> StopCondition:
        return as_condition(other) & self

    def __ror__(self, other: Condition) -> StopCondition:
        return as_condition(other) | self

    def __str__(self) -> str:
        return self.description

    def __repr__(self) -> str:
        return f"StopCondition({self.description})"


def as_condition(check: Condition) -> StopCondition:
    return check if isinstance(check, StopCondition) else StopCondition(check)


def field_value(output: Any, name: str) -> Any:
    """`name` of a structured output: a model's attribute, a mapping's key, or a key of
    JSON text. None when the output has no such field."""
    if isinstance(output, str):
        try:
            output = json.loads(output)
        except ValueError:
            return None
    if isinstance(output, dict):
        return output.get(name)
    return getattr(output, name, None)


def score_at_least(field: str, minimum: float) -> StopCondition:
    """Stop once the result's numeric `field` (of a structured output) reaches `minimum`."""

    def check(result: AgentResult, iteration: int) -> bool:
        value = field_value(result.output, field)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        return value >= minimum

    return StopCondition(check, f"{field} >= {minimum}")


def contains_keyword(word: str) -> StopCondition:
    """Stop once the result's text contains `word` (case-insensitive)."""
    if not word:
        raise ValueError("contains_keyword needs a non-empty word")
    wanted = word.casefold()

    def check(result: AgentResult, iteration: int) -> bool:
        return wanted in result.text.casefold()

    return StopCondition(check, f"text contains {word!r}")


def min_iterations_and_length(iterations: int, chars: int) -> StopCondition:
    """Stop once at least `iterations` iterations ran and the text has `chars` characters."""

    def check(result: AgentResult, iteration: int) -> bool:
        return iteration >= iterations and len(result.text) >= chars

    return StopCondition(check, f"at least {iterations} iterations and {chars} characters")
