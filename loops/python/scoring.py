"""A `LoopWorkflow`'s scores (`score=`) and the stop rules that read them (`stop_rules=`).

The rules are the kernel's (`runs.engine.stop_rules`), the same a YAML loop's `stop:` block
declares; this module checks what a recipe gives and turns an iteration's result into its
score and its point on the trend.
"""

from __future__ import annotations

import inspect
from decimal import Decimal

from runs.engine.stop_rules import THEN, CostPerPoint, Plateau, StopRules, Target, as_score

from .conditions import field_value
from .results import AgentResult

SOURCE = "python"  # Iteration.score_detail["source"] and the agent row's state["score"]
RULE_TYPES = {"target": Target, "plateau": Plateau, "cost_per_point": CostPerPoint}
SHOWN_CHARS = 80


def check_score(score):
    """`score=` as given: None, a field's name, or a callable score(result, iteration)."""
    if score is None or callable(score):
        return score
    if isinstance(score, str) and score.strip():
        return score
    raise TypeError(
        "score must be the name of a numeric field of the structured output (a str) or a "
        f"callable score(result, iteration) -> float | None, not {_kind(score)}"
    )


def check_stop_rules(rules, score) -> StopRules | None:
    """`stop_rules=` as given (None when it holds no rule); refused with the reason."""
    if rules is None:
        return None
    if not isinstance(rules, StopRules):
        raise TypeError(
            "stop_rules must be StopRules(target=Target(...), plateau=Plateau(...), "
            f"cost_per_point=CostPerPoint(...)) from loops.python, not {_kind(rules)}"
        )
    for name, rule_type in RULE_TYPES.items():
        _check_rule(name, getattr(rules, name), rule_type)
    if rules and score is None:
        raise ValueError(
            "stop_rules read scores: give the loop a score= (a field's name or a callable)"
        )
    return rules or None


def _check_rule(name: str, rule, rule_type) -> None:
    if rule is None:
        return
    label = rule_type.__name__
    if not isinstance(rule, rule_type):
        raise TypeError(f"StopRules({name}=...) must be a {label}(...), not {_kind(rule)}")
    if rule.then not in THEN:
        raise ValueError(f"{label}(then=...) must be {' or '.join(THEN)}, not {rule.then!r}")
    for field, value in vars(rule).items():
        if field == "then":
            continue
        if field == "iterations":
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
                raise ValueError(f"{label}(iterations=...) must be a whole number 1-1000")
        elif as_score(value) is None or (field != "at" and value < 0):
            extra = "" if field == "at" else " of 0 or more"
            raise ValueError(f"{label}({field}=...) must be a number{extra}, not {value!r}")


def _kind(value) -> str:
    return f"{type(value).__name__} {_short(value)}"


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


async def score_of(score, result: AgentResult, iteration: int) -> tuple[float | None, str]:
    """The iteration's score, or None and why it has none (said in the run's events)."""
    if isinstance(score, str):
        value = field_value(result.output, score)
        if value is None and result.structured is not None:
            value = field_value(result.structured, score)
        what = f"the field {score!r} of the output"
    else:
        try:
            value = score(result, iteration)
            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:  # noqa: BLE001 - a score that fails is no score, not the run's end
            return None, f"score() raised {type(exc).__name__}: {exc}"
        what = "score()"
    if value is None:
        return None, f"{what} gave no score"
    if as_score(value) is None:
        return None, f"{what} is not a number: {_short(value)}"
    return float(value), ""


def iteration_cost(calls: list[AgentResult]) -> Decimal | None:
    """What an iteration's agent calls cost; None when one of them reported no cost (an
    unpriced iteration says nothing honest about the cost per point)."""
    costs = [call.cost for call in calls]
    if not costs or any(cost is None for cost in costs):
        return None
    return sum(costs, Decimal(0))
