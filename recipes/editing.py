"""Changing a recipe's source from the admin or the API: validate, then version.

Both surfaces call these functions, so "an invalid source is refused, every saved change is
a new version, a synced recipe edited here is protected from the next sync" lives here once.
"""

from __future__ import annotations

import re

from django.db import IntegrityError, transaction
from django.utils.text import slugify

from recipes.loader import LoadResult
from recipes.models import Recipe
from recipes.validation import apply_result, validate_source

SLUG_PATTERN = re.compile(r"^[a-z0-9]+(?:[-_][a-z0-9]+)*$")


class SourceInvalid(Exception):
    """The source has errors; `result` holds them with their lines and paths."""

    def __init__(self, result: LoadResult):
        first = result.errors[0] if result.errors else "invalid"
        super().__init__(f"The recipe has {len(result.errors)} error(s); first: {first}")
        self.result = result


class SlugTaken(Exception):
    pass


class SlugInvalid(ValueError):
    pass


def check_slug(slug: str) -> str:
    if not slug or len(slug) > 100 or not SLUG_PATTERN.match(slug):
        raise SlugInvalid(
            "A slug is 1-100 lowercase letters, digits, '-' or '_', starting and ending "
            "with a letter or digit."
        )
    return slug


def slug_from(result: LoadResult, fallback: str = "recipe") -> str:
    name = getattr(result.spec, "name", "") if result.spec is not None else ""
    return (slugify(name) or slugify(fallback) or "recipe")[:100].strip("-_") or "recipe"


def save_source(recipe: Recipe, source: str, *, user=None, note: str = "") -> LoadResult:
    """Validate and make `source` the recipe's current version; refuse it when it has errors."""
    result = validate_source(source, recipe.source_path)
    if not result.ok:
        raise SourceInvalid(result)
    with transaction.atomic():
        apply_result(recipe, result)
        previous = recipe.current_version_id
        version = recipe.record_version(source, author=user, note=note[:200])
        if version.pk != previous and recipe.origin != Recipe.Origin.CONSOLE:
            # A synced recipe changed here is ours now: the next sync must not overwrite it.
            recipe.edited_locally = True
            recipe.save(update_fields=["edited_locally", "updated_at"])
    return result


def create_recipe(
    source: str,
    *,
    slug: str = "",
    user=None,
    note: str = "",
    enabled: bool = True,
    origin: str = Recipe.Origin.CONSOLE,
    source_path: str = "",
) -> tuple[Recipe, LoadResult]:
    """A new recipe from valid source (a console one unless told otherwise); the slug
    defaults to the recipe's name. `source_path` locates its `commands/` folder."""
    result = validate_source(source, source_path)
    if not result.ok:
        raise SourceInvalid(result)
    slug = check_slug(slug) if slug else slug_from(result)
    try:
        with transaction.atomic():
            recipe = Recipe(
                slug=slug, source=source, origin=origin, enabled=enabled, source_path=source_path
            )
            apply_result(recipe, result)
            recipe.save()
            recipe.record_version(source, author=user, note=(note or "created")[:200])
    except IntegrityError:
        raise SlugTaken(f"A recipe with the slug '{slug}' already exists.") from None
    return recipe, result


def free_slug(base: str) -> str:
    base = base[:90]
    slug, n = base, 1
    while Recipe.objects.filter(slug=slug).exists():
        n += 1
        slug = f"{base}-{n}"
    return slug


def duplicate(recipe: Recipe, *, user=None) -> Recipe:
    """A console copy named `<slug>-copy` (or -copy-2, ...), starting a history of its own."""
    slug = free_slug(f"{recipe.slug}-copy")
    copy = Recipe(
        slug=slug,
        source=recipe.source,
        origin=Recipe.Origin.CONSOLE,
        enabled=recipe.enabled,
        name=recipe.name,
        description=recipe.description,
    )
    apply_result(copy, validate_source(recipe.source, recipe.source_path))
    with transaction.atomic():
        copy.save()
        copy.record_version(recipe.source, author=user, note=f"duplicated from {recipe.slug}")
    return copy
