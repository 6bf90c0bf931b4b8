"""The `budget` a run may not exceed: one definition for every recipe kind, the start form,
the API and the command line.

    budget: {cost_usd: 2.5, tokens: 200000, wall_seconds: 3600, iterations: 40}
    budget: {cost_usd: 2.5, soft: true}     # reaching it asks a person (or soft: [cost_usd])

Every limit is optional; a missing one is no limit. `clean_budget` turns what a person or
a file wrote into the stored form (numbers, cost as a string of a decimal) or says, per
limit, what is wrong. The run kernel checks it between iterations (runs.budget).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

LIMITS = ("cost_usd", "tokens", "wall_seconds", "iterations")
LABELS = {
    "cost_usd": "cost (USD)",
    "tokens": "tokens",
    "wall_seconds": "wall-clock seconds",
    "iterations": "iterations",
}
MAX_COST = Decimal("1000000")


def title(name: str) -> str:
    """A limit's label at the start of a line: "Cost (USD)", "Wall-clock seconds"."""
    label = LABELS[name]
    return label[:1].upper() + label[1:]


MAX_COUNT = 10**12


class BudgetInvalid(ValueError):
    def __init__(self, errors: dict[str, str]):
        self.errors = errors
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))


def clean_limit(name: str, value: Any) -> str | int:
    if isinstance(value, bool):
        raise ValueError(f"must be a number, not {value!r}")
    if isinstance(value, str) and not value.isascii() and any(c.isdigit() for c in value):
        # Python's int() and Decimal() read any script's digits ("٣" is 3); a limit is
        # written as people read it back on every page.
        raise ValueError(f"must be written with the digits 0-9, not {value!r}")
    if name == "cost_usd":
        try:
            amount = Decimal(str(value).strip())
        except InvalidOperation:
            raise ValueError(f"must be an amount in US dollars, like 2.50, not {value!r}") from None
        if not amount.is_finite() or amount <= 0 or amount > MAX_COST:
            raise ValueError(f"must be more than 0 and at most {MAX_COST:,}")
        return str(amount.normalize()) if amount == amount.to_integral() else str(amount)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]+", value.strip()):
        value = int(value.strip())
    if not isinstance(value, int):
        raise ValueError(f"must be a whole number above 0, not {value!r}")
    if value <= 0:
        raise ValueError(f"must be a whole number above 0, not {value}")
    if value > MAX_COUNT:
        raise ValueError(f"must be at most {MAX_COUNT:,}")
    return value


SOFT = "soft"


def clean_soft(value: Any, raw: dict) -> list[str]:
    """`soft`: true (every limit given asks before going on) or a list of limit names."""
    if value is True:
        return [name for name in LIMITS if name in raw]
    if value is False or value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("must be true, or a list of the limits that ask before going on")
    unknown = [v for v in value if v not in LIMITS]
    if unknown:
        raise ValueError(f"unknown limit {unknown[0]!r}; the limits are {', '.join(LIMITS)}")
    missing = [v for v in value if v not in raw]
    if missing:
        raise ValueError(f"{missing[0]} is soft but has no limit")
    return [name for name in LIMITS if name in value]


def clean_budget(raw: Any, *, allow_empty_values: bool = False) -> dict:
    """The stored budget, or BudgetInvalid naming each wrong limit. Empty values (a blank
    form field) mean "no limit" when `allow_empty_values`."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise BudgetInvalid({"budget": "must be a mapping of limits: " + ", ".join(LIMITS)})
    errors, cleaned = {}, {}
    for key, value in raw.items():
        if key == SOFT:
            try:
                cleaned[SOFT] = clean_soft(value, raw)
            except ValueError as exc:
                errors[SOFT] = str(exc)
            continue
        if key not in LIMITS:
            errors[str(key)] = f"unknown limit; the limits are {', '.join(LIMITS)}"
            continue
        if value is None or (allow_empty_values and str(value).strip() == ""):
            continue
        try:
            cleaned[key] = clean_limit(key, value)
        except ValueError as exc:
            errors[key] = str(exc)
    if errors:
        raise BudgetInvalid(errors)
    return cleaned


def merged(recipe_budget: dict | None, override: dict | None, *, replace: bool = False) -> dict:
    """The recipe's limits, with the ones given at the start replacing them one by one (or
    all of them: `replace`, a form that showed them). Which are soft is the recipe's unless
    the start says: a limit a person kept keeps asking before going on."""
    recipe, given = recipe_budget or {}, override or {}
    out = {**({} if replace else recipe), **given}
    soft = [name for name in given.get(SOFT, recipe.get(SOFT, [])) if name in out]
    out.pop(SOFT, None)
    return {**out, SOFT: soft} if soft else out


def check_budget_field(value: Any, path: str, ctx) -> dict | None:
    """A recipe file's `budget`, reported with the line of each wrong limit."""
    from recipes.problems import child_path

    try:
        return clean_budget(value)
    except BudgetInvalid as exc:
        for key, message in exc.errors.items():
            where = path if key == "budget" else child_path(path, key)
            ctx.error(where, f"budget {key}: {message}" if key != "budget" else message)
        return None
