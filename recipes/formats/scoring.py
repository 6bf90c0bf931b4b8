"""How a loop is scored (`score:`) and when its scores stop it (`stop:`): one set of rules
for every kind that declares them in a file (a workflow's `loop`), cleaned into the stored
form the runtime reads (`runs.engine.stop_rules.rules_from`).

    score: {field: quality}                      # a number in the agent's structured output
    score: {bash: "python3 eval.py"}             # the last number a sandboxed command prints
    score: {judge: {provider: judge, rubric: "Rate 0-10 how ..."}}
    stop:
      target: 0.9                                # or {at: 0.9, then: gate}
      plateau: {iterations: 3, min_gain: 0.01}   # then: gate unless it says complete
      cost_per_point: {max_usd: 0.5, iterations: 3}
"""

from __future__ import annotations

from typing import Any

from recipes.formats.rule_context import RuleContext, is_blank
from recipes.problems import child_path, short_repr
from runs.engine.stop_rules import DEFAULT_THEN, RULES, THEN, as_score

SOURCES = ("field", "bash", "judge")
JUDGE_FIELDS = ("provider", "model", "rubric")
RULE_FIELDS = {
    "target": ("at", "then"),
    "plateau": ("iterations", "min_gain", "then"),
    "cost_per_point": ("max_usd", "iterations", "then"),
}
# A shorthand's number is the rule's first field: `target: 0.9`, `plateau: 3`.
SHORTHAND = {"target": "at", "plateau": "iterations", "cost_per_point": "max_usd"}


def check_score(raw: Any, path: str, label: str, ctx: RuleContext, schema: Any) -> dict | None:
    """The stored `score:` ({field: ...} | {bash: ...} | {judge: {...}}), or None with the
    problem said on its line."""
    if not isinstance(raw, dict) or len(raw) != 1 or next(iter(raw)) not in SOURCES:
        ctx.error(
            path,
            f"{label}: score needs exactly one of {', '.join(SOURCES)} "
            "(a structured output's field, a command's number, or a judge)",
        )
        return None
    source, value = next(iter(raw.items()))
    where = child_path(path, source)
    if source == "field":
        return _field(value, where, label, ctx, schema)
    if source == "bash":
        if not isinstance(value, str) or is_blank(value):
            ctx.error(where, f"{label}: score.bash needs a command that prints a number")
            return None
        return {"bash": value}
    return _judge(value, where, label, ctx)


def _field(name: Any, where: str, label: str, ctx: RuleContext, schema: Any) -> dict | None:
    if not isinstance(name, str) or is_blank(name):
        ctx.error(where, f"{label}: score.field needs the name of a number in output_format")
        return None
    properties = schema.get("properties") if isinstance(schema, dict) else None
    prop = properties.get(name) if isinstance(properties, dict) else None
    if not isinstance(prop, dict):
        ctx.error(
            where,
            f"{label}: score.field {short_repr(name)} needs this node's output_format to "
            "declare it (type: number)",
        )
        return None
    if prop.get("type") not in ("number", "integer"):
        ctx.error(
            where, f"{label}: score.field {short_repr(name)} must have type number in output_format"
        )
        return None
    return {"field": name}


def _judge(value: Any, where: str, label: str, ctx: RuleContext) -> dict | None:
    if isinstance(value, str):
        value = {"rubric": value}
    if not isinstance(value, dict):
        ctx.error(where, f"{label}: score.judge needs a mapping (provider, model, rubric)")
        return None
    for key in value:
        if key not in JUDGE_FIELDS:
            ctx.warn(child_path(where, key), f"{label}: unknown judge field {short_repr(key)}")
    rubric = value.get("rubric")
    if not isinstance(rubric, str) or is_blank(rubric):
        ctx.error(
            child_path(where, "rubric"),
            f"{label}: a judge needs a rubric (what a good answer is, and the scale)",
        )
        return None
    judge = {"rubric": rubric}
    for key in ("provider", "model"):
        if value.get(key) is not None:
            if not isinstance(value[key], str) or is_blank(value[key]):
                ctx.error(child_path(where, key), f"{label}: judge {key} must be a name")
                return None
            judge[key] = value[key]
    return {"judge": judge}


def check_stop(raw: Any, path: str, label: str, ctx: RuleContext, scored: bool) -> dict | None:
    """The stored `stop:` rules (each with its `then`), or None with the problems said."""
    if not isinstance(raw, dict) or not raw:
        ctx.error(path, f"{label}: stop needs one or more rules: {', '.join(RULES)}")
        return None
    if not scored:
        ctx.error(path, f"{label}: stop rules read scores: declare how the loop is scored (score:)")
    out = {}
    for name, value in raw.items():
        where = child_path(path, name)
        if name not in RULES:
            ctx.error(
                where,
                f"{label}: unknown stop rule {short_repr(name)}; the rules are {', '.join(RULES)}",
            )
            continue
        rule = _rule(name, value, where, label, ctx)
        if rule is not None:
            out[name] = rule
    return out if len(out) == len(raw) else None


def _rule(name: str, value: Any, where: str, label: str, ctx: RuleContext) -> dict | None:
    if as_score(value) is not None:
        value = {SHORTHAND[name]: value}
    if not isinstance(value, dict):
        ctx.error(
            where,
            f"{label}: stop.{name} needs a number or a mapping ({', '.join(RULE_FIELDS[name])})",
        )
        return None
    rule: dict[str, Any] = {"then": DEFAULT_THEN[name]}
    ok = True
    for key, given in value.items():
        at = child_path(where, key)
        if key not in RULE_FIELDS[name]:
            ctx.error(
                at,
                f"{label}: stop.{name} has no field {short_repr(key)}; it takes "
                f"{', '.join(RULE_FIELDS[name])}",
            )
            ok = False
        elif key == "then":
            if given not in THEN:
                ctx.error(at, f"{label}: then must be {' or '.join(THEN)}, not {short_repr(given)}")
                ok = False
            rule["then"] = given
        elif key == "iterations":
            if not isinstance(given, int) or isinstance(given, bool) or not 1 <= given <= 1000:
                ctx.error(at, f"{label}: stop.{name}.iterations must be a whole number 1-1000")
                ok = False
            rule["iterations"] = given
        else:
            if as_score(given) is None or (key != "at" and given < 0):
                ctx.error(
                    at,
                    f"{label}: stop.{name}.{key} must be a number"
                    + ("" if key == "at" else " of 0 or more"),
                )
                ok = False
            rule[key] = float(given) if as_score(given) is not None else given
    missing = SHORTHAND[name]
    if missing not in rule:
        ctx.error(where, f"{label}: stop.{name} needs {missing}")
        ok = False
    return rule if ok else None
