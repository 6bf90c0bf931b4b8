"""``schema: planeai.loop.recipe.v1`` recipes: run the rules, then type-check the result.

Same shape as the workflow format: the rules (`format_rules.py`) say what is wrong in the
author's terms, pydantic (`spec.py`) checks types, and every problem carries its line.
"""

from __future__ import annotations

from pydantic import ValidationError

from loops.stepmachine.format_rules import check_planeai
from loops.stepmachine.spec import PlaneSpec
from recipes.formats.problem_mapping import validation_problems
from recipes.formats.rule_context import RuleContext
from recipes.problems import LineMap, LoadResult, Problem, sort_problems

__all__ = ["PlaneSpec", "parse_planeai"]


def parse_planeai(data: dict, lines: LineMap, *, provider_check=None) -> LoadResult:
    ctx = RuleContext(lines=lines, provider_check=provider_check)
    cleaned = check_planeai(data, ctx)
    errors = list(ctx.errors)
    spec: PlaneSpec | None = None
    try:
        spec = PlaneSpec.model_validate(cleaned)
    except ValidationError as exc:
        reported = {p.path for p in errors}
        for problem in validation_problems(exc, lines):
            path = problem.path.replace(".from_", ".from").replace("schema_", "schema")
            if path in reported or any(path.startswith(p + ".") for p in reported if p):
                continue
            reported.add(path)
            errors.append(Problem(path, *lines.locate(path), problem.message))
    if errors:
        spec = None
    return LoadResult(
        kind="planeai",
        spec=spec,
        errors=sort_problems(list(dict.fromkeys(errors))),
        warnings=sort_problems(list(dict.fromkeys(ctx.warnings))),
    )
