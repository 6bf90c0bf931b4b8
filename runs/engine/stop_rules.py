"""Stop rules on a loop's scores: pure functions every kind uses (a workflow's `stop:`, the
Python kind's `StopRules`, the inbox's "about to plateau").

A loop that is scored records a number per iteration (`Iteration.score`). Three rules read
the scores (and the iterations' cost) so far:

- `target`: the latest score is at least `at`;
- `plateau`: the best of the last `iterations` scores is not more than `min_gain` above
  the best before them (it needs `iterations` + 1 scores);
- `cost_per_point`: the last `iterations` iterations cost more than `max_usd` per point of
  score they gained (no gain at a cost is infinitely dear; it needs `iterations` + 1
  scores).

Each rule either ends the loop (`then: complete`) or opens a gate (`then: gate`) naming
the rule and the score trend. The first rule that fires, in that order, is the one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from decimal import Decimal

COMPLETE, GATE = "complete", "gate"
THEN = (COMPLETE, GATE)
RULES = ("target", "plateau", "cost_per_point")
# What a rule does when the recipe does not say: reaching a target is the loop's goal; a
# plateau or a dear point is a question for a person.
DEFAULT_THEN = {"target": COMPLETE, "plateau": GATE, "cost_per_point": GATE}
TREND_SHOWN = 8


@dataclass(frozen=True)
class Point:
    """One scored iteration: its number, its score and what it cost (None: not reported)."""

    number: int
    score: float
    cost_usd: Decimal | None = None


@dataclass(frozen=True)
class Target:
    at: float
    then: str = COMPLETE


@dataclass(frozen=True)
class Plateau:
    iterations: int
    min_gain: float = 0.0
    then: str = GATE


@dataclass(frozen=True)
class CostPerPoint:
    max_usd: float
    iterations: int = 3
    then: str = GATE


@dataclass(frozen=True)
class StopRules:
    target: Target | None = None
    plateau: Plateau | None = None
    cost_per_point: CostPerPoint | None = None

    def __bool__(self) -> bool:
        return any((self.target, self.plateau, self.cost_per_point))

    def as_dict(self) -> dict:
        """What the chart draws and the API shows of the rules."""
        return {name: asdict(getattr(self, name)) for name in RULES if getattr(self, name)}


@dataclass(frozen=True)
class Firing:
    """A rule that fired after iteration `number`: which, what it does, and why in words."""

    rule: str
    then: str
    number: int
    reason: str
    trend: tuple[float, ...]

    @property
    def words(self) -> str:
        """The gate's message or the completion's note: the rule, why, and the trend."""
        return f"Stop rule {self.rule}: {self.reason}. Scores so far: {trend_words(self.trend)}."

    def as_dict(self) -> dict:
        return {
            "rule": self.rule,
            "then": self.then,
            "iteration": self.number,
            "reason": self.reason,
            "trend": list(self.trend),
        }


def rules_from(raw: dict | None) -> StopRules:
    """StopRules from the stored form (a recipe's cleaned `stop:` block, `StopRules.as_dict`)."""
    raw = raw or {}
    target = raw.get("target")
    plateau = raw.get("plateau")
    dear = raw.get("cost_per_point")
    return StopRules(
        target=Target(**target) if target else None,
        plateau=Plateau(**plateau) if plateau else None,
        cost_per_point=CostPerPoint(**dear) if dear else None,
    )


def shown(value: float) -> str:
    """A score as pages say it: up to four significant decimals, no trailing zeros."""
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return text if text not in ("", "-0") else "0"


def trend_words(trend) -> str:
    scores = [shown(s) for s in trend]
    if len(scores) > TREND_SHOWN:
        scores = ["…", *scores[-TREND_SHOWN:]]
    return " → ".join(scores) if scores else "none"


def fired(rules: StopRules, points: list[Point]) -> Firing | None:
    """The first rule that fires on `points` (in iteration order, the latest last)."""
    if not rules or not points:
        return None
    trend = tuple(p.score for p in points)
    latest = points[-1]
    for name in RULES:
        rule = getattr(rules, name)
        reason = rule and _REASONS[name](rule, points)
        if reason:
            return Firing(name, rule.then, latest.number, reason, trend)
    return None


def _target(rule: Target, points: list[Point]) -> str | None:
    latest = points[-1].score
    if latest >= rule.at:
        return f"score {shown(latest)} reached the target {shown(rule.at)}"
    return None


def plateau_gain(rule: Plateau, points: list[Point]) -> float | None:
    """How much the last `rule.iterations` scores gained over the best before them, or
    None while there are too few scores to tell."""
    if len(points) <= rule.iterations:
        return None
    window = points[-rule.iterations :]
    before = points[: -rule.iterations]
    return max(p.score for p in window) - max(p.score for p in before)


def _plateau(rule: Plateau, points: list[Point]) -> str | None:
    gain = plateau_gain(rule, points)
    if gain is None or gain > rule.min_gain:
        return None
    return (
        f"no gain above {shown(rule.min_gain)} for {rule.iterations} iterations "
        f"(best before: {shown(max(p.score for p in points[: -rule.iterations]))}, "
        f"since: {shown(max(p.score for p in points[-rule.iterations :]))})"
    )


def plateau_near(rule: Plateau | None, points: list[Point]) -> bool:
    """Whether one more flat iteration fires the plateau rule: the inbox's "stalled"."""
    if rule is None or rule.iterations <= 1:
        return False
    shorter = Plateau(iterations=rule.iterations - 1, min_gain=rule.min_gain)
    gain = plateau_gain(shorter, points)
    return gain is not None and gain <= rule.min_gain and _plateau(rule, points) is None


def _cost_per_point(rule: CostPerPoint, points: list[Point]) -> str | None:
    if len(points) <= rule.iterations:
        return None
    window = points[-rule.iterations :]
    if any(p.cost_usd is None for p in window):
        return None  # an unpriced iteration: nothing honest to say about the cost
    cost = sum((p.cost_usd for p in window), Decimal(0))
    gain = window[-1].score - points[-rule.iterations - 1].score
    if cost <= 0:
        return None
    if gain <= 0:
        return (
            f"the last {rule.iterations} iterations cost ${cost:.4f} and gained no points "
            f"(limit ${shown(rule.max_usd)} a point)"
        )
    per_point = float(cost) / gain
    if per_point <= rule.max_usd:
        return None
    return (
        f"the last {rule.iterations} iterations cost ${shown(per_point)} a point of score "
        f"(${cost:.4f} for {shown(gain)}; limit ${shown(rule.max_usd)})"
    )


_REASONS = {"target": _target, "plateau": _plateau, "cost_per_point": _cost_per_point}


SCORE_FIELD = "score"


def as_score(value) -> float | None:
    """`value` as a score: a finite number (an int, a float, a Decimal; not a bool, not a
    numeric string), else None. The one rule of what counts as a number wherever scores
    and stop rules are read or written."""
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def score_in(payload) -> float | None:
    """The score an answer gives of itself: a finite number under `score` at the top of a
    structured answer (any kind's: a driven agent's output schema, a step machine's
    handoff data, a workflow node's output_format), else None."""
    return as_score(payload.get(SCORE_FIELD)) if isinstance(payload, dict) else None
