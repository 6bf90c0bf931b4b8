"""``kind: workflow`` recipes: run the rules, then type-check the cleaned document.

The rules (:mod:`loops.workflow.format_rules`) report what an author got wrong in
their own terms; pydantic (:mod:`loops.workflow.spec`) then checks types, and
its errors are mapped back to field paths and lines (:mod:`recipes.formats.problem_mapping`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from loops.workflow.format_rules import check_workflow
from loops.workflow.spec import (
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
from recipes.formats.problem_mapping import validation_problems
from recipes.formats.resources import Resources
from recipes.formats.rule_context import RuleContext
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
    resources: Resources | None = None,
) -> LoadResult:
    """Validate a decoded ``kind: workflow`` document. Never raises for bad input."""
    if resources is None:
        resources = Resources(commands_dirs=tuple(Path(d) for d in commands_dirs))
    ctx = RuleContext(
        lines=lines,
        commands_dirs=resources.commands_dirs,
        resources=resources,
        include_chain=(str(Path(resources.source_path).resolve()),)
        if resources.source_path
        else (),
        provider_fallback=provider_fallback,
    )
    _, errors, spec = check_and_type(data, ctx)
    return LoadResult(
        kind="workflow",
        spec=spec,
        errors=sort_problems(_unique(errors)),
        warnings=sort_problems(_unique(ctx.warnings)),
    )


def check_and_type(data: dict, ctx: RuleContext) -> tuple[dict, list[Problem], WorkflowSpec | None]:
    """The cleaned document and every error: the rules' first, then pydantic's (mapped to
    the author's lines). An included workflow is checked this way in its own file."""
    cleaned = check_workflow(data, ctx)
    errors = list(ctx.errors)
    spec: WorkflowSpec | None = None
    try:
        spec = WorkflowSpec.model_validate(cleaned)
    except ValidationError as exc:
        reported = {p.path for p in errors}
        for problem in validation_problems(exc, ctx.lines):
            # Rules already explained these paths; the node kind is derived, not authored.
            if problem.path in reported or ctx.is_derived(problem.path):
                continue
            reported.add(problem.path)
            errors.append(problem)
    return cleaned, errors, None if errors else spec


def _unique(problems: list[Problem]) -> list[Problem]:
    return list(dict.fromkeys(problems))


def read_workflow(source) -> LoadResult:
    """Read any YAML as a workflow (the kind asked last, runs.kinds.LoopKind.read_order):
    what is not a mapping of fields is reported here, with YAML's own problems."""
    if source.data is None and source.yaml_problems:
        return LoadResult(kind="workflow", spec=None, errors=sort_problems(source.yaml_problems))
    if source.mapping is None:
        kind_name = "a list" if isinstance(source.data, list) else "a single value"
        line, column = source.lines.locate("")
        problem = Problem(
            "",
            line or 1,
            column or 1,
            f"a recipe must be a mapping of fields (name, nodes, ...), not {kind_name}",
        )
        return LoadResult(
            kind="workflow", spec=None, errors=sort_problems([*source.yaml_problems, problem])
        )
    options = source.options
    return parse_workflow(
        source.mapping,
        source.lines,
        commands_dirs=options.commands_dirs,
        provider_fallback=options.default_provider(),
        resources=options.resources,
    )
