"""Validate a recipe's source and record the verdict on the Recipe row."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

from console.models import default_project_id
from recipes.loader import LoadResult, load_recipe
from recipes.server_paths import without_server_paths
from recipes.sources import resources_for


@dataclass(frozen=True)
class ProviderLookups:
    """Whether the providers a recipe names can answer here: the kernel's to say (its
    provider registry and the admin's provider rows). The kernel imports the catalogue
    (a run's recipe, its spec), so the catalogue does not import the kernel back: the
    kernel plugs its lookups in from `RunsConfig.ready()` (`use_providers`)."""

    # A provider answers for nodes that name none in a project's recipes (the admin's
    # default there, or the setting).
    default_configured: Callable[[int | None], bool]
    # Why `name` (None: the default provider) cannot answer for a step of a project's
    # recipe, or None.
    unresolvable: Callable[[str | None, int | None], str | None]


_providers: ProviderLookups | None = None


def use_providers(lookups: ProviderLookups) -> None:
    global _providers
    _providers = lookups


def provider_lookups() -> ProviderLookups:
    if _providers is None:
        raise ImproperlyConfigured("no provider lookups: the runs app gives them in ready()")
    return _providers


def default_provider_configured(project_id: int | None = None) -> bool:
    """Whether project `project_id`'s recipes (None: the default project's) have a
    default provider."""
    return provider_lookups().default_configured(project_id or default_project_id())


def validate_source(
    source: str, source_path: str = "", *, providers: bool = True, project_id: int | None = None
) -> LoadResult:
    """`project_id`: the project whose recipe the source is (None: the default project,
    where a new file's recipe goes); the providers it names are those that project may
    use. `providers=False` leaves out whether they can answer here: a run's pinned version
    loads whatever the providers became since (a turn that cannot reach its provider
    fails, saying so). The kind whose the source is reads it (recipes.loader)."""
    if not providers:
        return load_recipe(source, source_path=source_path, resources=resources_for(source_path))
    lookups = provider_lookups()

    @functools.cache  # once per reading, and only by a kind that reads providers (a Python
    def project() -> int:  # recipe is read without a database)
        return project_id or default_project_id()

    return load_recipe(
        source,
        source_path=source_path,
        resources=resources_for(source_path),
        provider_fallback=lambda: lookups.default_configured(project()),
        provider_check=lambda name: lookups.unresolvable(name, project()),
    )


def repository_default(recipe, console_default: Callable[[int], bool]) -> str:
    """What the recipe list says about a recipe's default provider: the repository's default
    assistant, when it is the one its agent nodes without a provider get (asked only then:
    `console_default(project_id)`, whether the console has one for the recipe's project)."""
    assistant = (recipe.problems or {}).get("repository_assistant")
    if not assistant or console_default(recipe.project_id):
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


def spec_name(spec, slug: str) -> str:
    """A recipe's name as a loaded version says it (a run's page names its own version's)."""
    return (getattr(spec, "name", "") or slug)[:200]


def apply_result(recipe, result: LoadResult) -> None:
    """Copy what the source says about itself onto the row (name, description, kind)."""
    recipe.valid = result.ok
    recipe.problems = problems_dict(result)
    assistant = getattr(result.spec, "default_provider", None)
    if assistant and not getattr(result.spec, "provider", None):
        recipe.problems["repository_assistant"] = assistant
    recipe.kind = result.kind
    if result.spec is not None:
        recipe.name = spec_name(result.spec, recipe.slug)
        recipe.description = getattr(result.spec, "description", "") or ""
    elif not recipe.name:
        recipe.name = recipe.slug


def refresh_verdicts(**_signal) -> None:
    """Validate every recipe again after the providers changed: whether a recipe can run
    depends on them (a default provider set, a named one added or removed), and the list
    and the start button read the stored verdict. Connected in recipes.apps."""
    from recipes.models import Recipe

    fields = ["valid", "problems", "kind", "name", "description"]
    only = ("pk", "slug", "source", "source_path", "project_id", *fields)
    for recipe in Recipe.objects.only(*only):
        before = [getattr(recipe, name) for name in fields]
        result = validate_source(recipe.source, recipe.source_path, project_id=recipe.project_id)
        apply_result(recipe, result)
        if [getattr(recipe, name) for name in fields] != before:
            recipe.save(update_fields=fields)
