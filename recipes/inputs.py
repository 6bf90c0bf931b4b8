"""Typed run inputs (a recipe's `inputs:` definitions): clean what a person or script sent."""

from __future__ import annotations

import math


class InputsInvalid(Exception):
    def __init__(self, errors: dict[str, str]):
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


TRUE = {"1", "true", "yes", "on"}
FALSE = {"0", "false", "no", "off", ""}


def clean_inputs(declared: dict, raw: dict) -> dict:
    """Return typed values for every declared input; unknown keys are an error."""
    errors: dict[str, str] = {}
    cleaned: dict = {}
    for key in raw:
        if key not in declared:
            errors[key] = "is not an input of this recipe"
    for name, spec in sorted(declared.items()):
        value = raw.get(name)
        if value is None or value == "":
            if spec.type == "boolean":
                value = spec.default if spec.default is not None and name not in raw else False
                cleaned[name] = bool(value) if not isinstance(value, str) else value.lower() in TRUE
                continue
            if spec.default is not None:
                cleaned[name] = spec.default
            elif spec.required:
                errors[name] = "this input is required"
            else:
                cleaned[name] = ""
            continue
        try:
            cleaned[name] = _coerce(spec, value)
        except ValueError as exc:
            errors[name] = str(exc)
    if errors:
        raise InputsInvalid(errors)
    return cleaned


def _coerce(spec, value):
    kind = spec.type
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in TRUE:
            return True
        if text in FALSE:
            return False
        raise ValueError("must be true or false")
    if kind == "number":
        if isinstance(value, bool):
            raise ValueError("must be a number")
        try:
            number = float(value if isinstance(value, int | float) else str(value).strip())
        except (ValueError, OverflowError):
            raise ValueError("must be a number") from None
        if not math.isfinite(number):
            raise ValueError("must be a finite number")
        if isinstance(value, int):
            return value
        return int(number) if number.is_integer() else number
    text = str(value)
    if kind == "select":
        allowed = [option.value for option in spec.options]
        if text not in allowed:
            raise ValueError(f"must be one of: {', '.join(allowed)}")
    if kind in ("text", "branch", "task", "select") and "\n" in text:
        raise ValueError("must be a single line")
    if len(text) > 100_000:
        raise ValueError("is too long (100,000 characters at most)")
    return text
