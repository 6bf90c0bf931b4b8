"""The pieces every kind's spec is built of: the base model, texts and numbers authors
write, inline providers, and a run's inputs (a workflow's, a step machine's and a driven
loop's declare them alike)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from recipes.problems import short_repr

__all__ = [
    "InputOption",
    "InputSpec",
    "OnTimeout",
    "PositiveInt",
    "ProviderSpec",
    "SpecModel",
    "Text",
]

OnTimeout = Literal["remind", "reject", "fail"]
InputType = Literal["text", "textarea", "boolean", "select", "number", "branch", "task"]


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


Text = Annotated[str, AfterValidator(_not_blank)]
PositiveInt = Annotated[int, Field(gt=0)]


class SpecModel(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", protected_namespaces=())


class ProviderSpec(SpecModel):
    kind: Text
    command: str | None = None
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("api_key_env")
    @classmethod
    def _allowed_key_env(cls, value: str | None, info: ValidationInfo) -> str | None:
        from runs.providers.policy import key_env_problem

        if problem := key_env_problem(value, info.data.get("kind")):
            raise ValueError(problem)
        return value

    @field_validator("base_url")
    @classmethod
    def _allowed_host(cls, value: str | None) -> str | None:
        from runs.providers.policy import host_problem

        if problem := host_problem(value):
            raise ValueError(problem)
        return value

    @field_validator("options")
    @classmethod
    def _limits_are_counts(cls, value: dict[str, Any]) -> dict[str, Any]:
        from runs.providers.policy import limit_problems

        if problems := limit_problems(value):
            raise ValueError("; ".join(problems.values()))
        return value

    @model_validator(mode="before")
    @classmethod
    def _collect_options(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        known = {k: v for k, v in data.items() if k in cls.model_fields}
        extra = {k: v for k, v in data.items() if k not in cls.model_fields}
        if extra:
            options = known.get("options")
            if options is None or isinstance(options, dict):
                known["options"] = {**(options or {}), **extra}
        return known


class InputOption(SpecModel):
    value: str
    label: str

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"value": data, "label": data}
        if isinstance(data, dict) and "label" not in data and isinstance(data.get("value"), str):
            return {**data, "label": data["value"]}
        return data


class InputSpec(SpecModel):
    type: InputType = "text"
    label: str | None = None
    description: str | None = None
    required: bool = False
    options: list[InputOption] = Field(default_factory=list, validate_default=True)
    default: str | bool | int | float | None = None

    @field_validator("options")
    @classmethod
    def _select_needs_options(cls, value: list[InputOption], info: ValidationInfo) -> Any:
        if info.data.get("type") == "select" and not value:
            raise ValueError("a select input needs a non-empty list of options")
        return value

    @field_validator("default", mode="before")
    @classmethod
    def _default_matches_type(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return value
        kind = info.data.get("type", "text")
        if kind == "boolean":
            ok = isinstance(value, bool)
            expected = "true or false"
        elif kind == "number":
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            expected = "a number"
        else:
            ok = isinstance(value, str)
            expected = "a string"
        if not ok:
            raise ValueError(
                f"default of a {kind} input must be {expected}, not {short_repr(value)}"
            )
        options = info.data.get("options")
        if kind == "select" and options and value not in {o.value for o in options}:
            allowed = ", ".join(repr(o.value) for o in options)
            raise ValueError(f"default {short_repr(value)} is not one of the options ({allowed})")
        return value
