"""Validate a recipe's source and record the verdict on the Recipe row."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from console.redact import without_server_paths
from recipes.formats.python import is_python_path, parse_python
from recipes.loader import LoadResult, load_recipe
from recipes.sources import resources_for


def default_provider_configured() -> bool:
    """A provider answers for nodes that name none: the admin's default, or the setting."""
    from runs.models import ProviderConfig

    if settings.LOOP_DEFAULT_PROVIDER:
        return True
    return ProviderConfig.objects.filter(is_default=True, enabled=True).exists()


def validate_source(source: str, source_path: str = "") -> LoadResult:
    if is_python_path(source_path):
        return parse_python(source, Path(source_path).stem)
    return load_recipe(
        source,
        resources=resources_for(source_path),
        provider_fallback=default_provider_configured(),
    )


def repository_default(recipe, console_default: bool) -> str:
    """What the recipe list says about a recipe's default provider: the repository's default
    assistant, when it is the one its agent nodes without a provider get."""
    assistant = (recipe.problems or {}).get("repository_assistant")
    if not assistant or console_default:
        return ""
    return f"default provider: {assistant} (the repository's .archon/config.yaml)"


def problems_dict(result: LoadResult) -> dict:
    """Problems as shown on pages and through the API: to anyone who may read recipes, so
    without the server's folder paths."""

    def public(problem) -> dict:
        shown = problem.as_dict()
        shown["message"] = without_server_paths(shown["message"])
        return shown

    return {
        "errors": [public(p) for p in result.errors],
        "warnings": [public(p) for p in result.warnings],
    }


def apply_result(recipe, result: LoadResult) -> None:
    """Copy what the source says about itself onto the row (name, description, kind)."""
    recipe.valid = result.ok
    recipe.problems = problems_dict(result)
    assistant = getattr(result.spec, "default_provider", None)
    if assistant and not getattr(result.spec, "provider", None):
        recipe.problems["repository_assistant"] = assistant
    recipe.kind = result.kind
    if result.spec is not None:
        recipe.name = (getattr(result.spec, "name", "") or recipe.slug)[:200]
        recipe.description = getattr(result.spec, "description", "") or ""
    elif not recipe.name:
        recipe.name = recipe.slug
