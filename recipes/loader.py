"""Recipe loading: YAML text -> plain data with positions -> a validated spec.

``load_recipe`` never raises for bad input: every failure is reported as a
:class:`Problem` carrying a field path and the 1-based line/column of that field.
The steps live in their own modules: :mod:`recipes.yaml_reader` (YAML and the line
map), :mod:`recipes.problems` (problems and results) and :mod:`recipes.formats`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from console.redact import plain_cause
from recipes.formats.driven import is_driven, parse_driven
from recipes.formats.planeai import parse_planeai
from recipes.formats.resources import Resources
from recipes.formats.workflow import parse_workflow
from recipes.problems import LoadResult, Problem, sort_problems
from recipes.yaml_reader import MAX_SOURCE_BYTES, parse_yaml

__all__ = ["MAX_SOURCE_BYTES", "PLANEAI_SCHEMA", "LoadResult", "Problem", "load_recipe"]

PLANEAI_SCHEMA = "planeai.loop.recipe.v1"
log = logging.getLogger(__name__)


def load_recipe(
    source: str,
    *,
    commands_dirs: Sequence[Path] = (),
    provider_fallback: bool = True,
    resources: Resources | None = None,
    provider_check=None,
) -> LoadResult:
    """Parse and validate a recipe. Never raises for bad input.

    ``provider_fallback=False`` says no default provider is configured: agent nodes that
    name no provider are then an error. ``provider_check(name)`` says why a step-machine
    role's provider (None: the default) cannot answer, or None. ``resources`` says where command files, named
    scripts and included workflows are (``commands_dirs`` alone is enough without those).
    """
    data, lines, yaml_problems = parse_yaml(source)
    if data is None and yaml_problems:
        return LoadResult(kind="workflow", spec=None, errors=sort_problems(yaml_problems))
    if not isinstance(data, dict):
        kind_name = "a list" if isinstance(data, list) else "a single value"
        line, column = lines.locate("")
        problem = Problem(
            "",
            line or 1,
            column or 1,
            f"a recipe must be a mapping of fields (name, nodes, ...), not {kind_name}",
        )
        return LoadResult(
            kind="workflow", spec=None, errors=sort_problems([*yaml_problems, problem])
        )

    schema = data.get("schema")
    planeai = isinstance(schema, str) and schema.strip() == PLANEAI_SCHEMA
    kind = "planeai" if planeai else "driven" if is_driven(data) else "workflow"
    try:
        if kind == "planeai":
            result = parse_planeai(data, lines, provider_check=provider_check)
        elif kind == "driven":
            result = parse_driven(data, lines, provider_fallback=provider_fallback)
        else:
            result = parse_workflow(
                data,
                lines,
                commands_dirs=commands_dirs,
                provider_fallback=provider_fallback,
                resources=resources,
            )
    except Exception as exc:  # last-resort guard: never raise on input
        log.exception("could not validate a recipe")
        result = LoadResult(
            kind=kind,
            spec=None,
            errors=[Problem("", 1, 1, f"could not validate recipe ({plain_cause(exc)})")],
        )
    if yaml_problems:
        # A value YAML could not read shows up as null below; keep only the YAML reason.
        broken = {p.path for p in yaml_problems}
        rest = [p for p in result.errors if p.path not in broken]
        result.errors = sort_problems([*yaml_problems, *rest])
        result.spec = None
    return result
