"""Pydantic's errors, said in the author's terms and placed on the line they wrote."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from recipes.problems import LineMap, Problem, child_path, short_repr

__all__ = ["validation_problems"]


_INT_ERRORS = {"int_type", "int_parsing", "int_from_float"}
_POSITIVE_FIELDS = {"max_iterations", "idle_timeout", "timeout"}


def _loc_to_path(prefix: str, loc: tuple[Any, ...]) -> str:
    path = prefix
    for part in loc:
        path = child_path(path, part)
    return path


def _readable(error: dict[str, Any], field: str) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    value = error.get("input")
    if field in _POSITIVE_FIELDS and (kind in _INT_ERRORS or kind.startswith("greater_than")):
        unit = " (milliseconds)" if field != "max_iterations" else ""
        return f"must be a positive integer{unit}, not {short_repr(value)}"
    if kind == "missing":
        return "is required"
    if kind == "string_type":
        if isinstance(value, bool | int | float):
            return f"must be a string, not {short_repr(value)} (quote it if you meant text)"
        return "must be a string"
    if kind in _INT_ERRORS:
        return f"must be an integer, not {short_repr(value)}"
    if kind in {"bool_type", "bool_parsing"}:
        return f"must be true or false, not {short_repr(value)}"
    if kind in {"float_type", "float_parsing"}:
        return f"must be a number, not {short_repr(value)}"
    if kind == "list_type":
        return "must be a list"
    if kind in {"dict_type", "model_type", "model_attributes_type"}:
        return "must be a mapping"
    if kind == "literal_error":
        label = f"{field} " if field else ""
        return f"unknown {label}{short_repr(value)}; expected one of {ctx.get('expected')}"
    if kind in {"too_short", "string_too_short"}:
        return "must not be empty"
    if kind == "greater_than_equal":
        return f"must be at least {ctx.get('ge')}"
    if kind == "greater_than":
        return f"must be greater than {ctx.get('gt')}"
    if kind == "less_than_equal":
        return f"must be at most {ctx.get('le')}"
    if kind == "value_error":
        return str(ctx.get("error", error.get("msg", "invalid value")))
    return str(error.get("msg", "invalid value"))


def validation_problems(exc: ValidationError, lines: LineMap, prefix: str = "") -> list[Problem]:
    """Convert a pydantic error into positioned problems (one per error)."""
    problems: list[Problem] = []
    for error in exc.errors(include_url=False):
        loc = tuple(error.get("loc", ()))
        path = _loc_to_path(prefix, loc)
        field = next((p for p in reversed(loc) if isinstance(p, str)), "")
        problems.append(lines.problem(path, _readable(error, field)[:500]))
    return problems
