"""``kind: workflow`` recipes: run the rules, then type-check the cleaned document.

The rules (:mod:`recipes.formats.workflow_rules`) report what an author got wrong in
their own terms; pydantic (:mod:`recipes.formats.workflow_spec`) then checks types, and
its errors are mapped back to field paths and lines (:mod:`recipes.formats.problem_mapping`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from recipes.formats.problem_mapping import validation_problems
from recipes.formats.rule_context import RuleContext
from recipes.formats.workflow_rules import check_workflow
from recipes.formats.workflow_spec import (
    ApprovalSpec,
    DecisionSpec,
    InputOption,
    InputSpec,
    LoopGroupSpec,
    LoopSpec,
    NodeSpec,
    ProviderSpec,
    RetrySpec,
    WorkflowSpec,
)
from recipes.problems import LineMap, LoadResult, Problem, sort_problems

__all__ = [
    "ApprovalSpec",
    "DecisionSpec",
    "InputOption",
    "InputSpec",
    "LoopGroupSpec",
    "LoopSpec",
    "NodeSpec",
    "ProviderSpec",
    "RetrySpec",
    "WorkflowSpec",
    "parse_workflow",
]


def parse_workflow(
    data: dict,
    lines: LineMap,
    *,
    commands_dirs: Sequence[Path] = (),
    provider_fallback: bool = True,
) -> LoadResult:
    """Validate a decoded ``kind: workflow`` document. Never raises for bad input."""
    ctx = RuleContext(
        lines=lines,
        commands_dirs=tuple(Path(d) for d in commands_dirs),
        provider_fallback=provider_fallback,
    )
    cleaned = check_workflow(data, ctx)
    errors = list(ctx.errors)
    spec: WorkflowSpec | None = None
    try:
        spec = WorkflowSpec.model_validate(cleaned)
    except ValidationError as exc:
        reported = {p.path for p in errors}
        for problem in validation_problems(exc, lines):
            # Rules already explained these paths; the node kind is derived, not authored.
            if problem.path in reported or ctx.is_derived(problem.path):
                continue
            reported.add(problem.path)
            errors.append(problem)
    if errors:
        spec = None
    return LoadResult(
        kind="workflow",
        spec=spec,
        errors=sort_problems(_unique(errors)),
        warnings=sort_problems(_unique(ctx.warnings)),
    )


def _unique(problems: list[Problem]) -> list[Problem]:
    return list(dict.fromkeys(problems))
