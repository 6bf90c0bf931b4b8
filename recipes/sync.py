"""Synchronise recipe files into the database.

Sources, lowest precedence first: bundled (shipped in recipes/builtin), user (a folder in
the user's config directory), project (each folder of LOOP_RECIPE_DIRS). The same slug from
a higher source shadows a lower one. A recipe edited in the console is left alone unless
`force` is set.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.db import transaction
from django.utils.text import slugify

from recipes.models import Recipe
from recipes.sources import BUILTIN_DIR, project_dirs, user_dir
from recipes.validation import apply_result, validate_source


@dataclass
class Found:
    slug: str
    origin: str
    path: Path
    shadows: list[str]


def slug_for(path: Path) -> str:
    return slugify(path.stem)[:100] or "recipe"


def discover() -> dict[str, Found]:
    found: dict[str, Found] = {}
    sources = [
        (Recipe.Origin.BUILTIN, [BUILTIN_DIR]),
        (Recipe.Origin.USER, [user_dir()]),
        # Like PATH, the first folder listed in LOOP_RECIPE_DIRS wins; visiting the list
        # backwards lets it overwrite the ones listed after it.
        (Recipe.Origin.PROJECT, list(reversed(project_dirs()))),
    ]
    for origin, folders in sources:
        for folder in folders:
            if not folder.is_dir():
                continue
            for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):
                slug = slug_for(path)
                previous = found.get(slug)
                shadows = (
                    [*previous.shadows, f"{previous.origin}:{previous.path}"] if previous else []
                )
                found[slug] = Found(slug, origin, path, shadows)
    return found


@dataclass
class SyncReport:
    slug: str
    action: str  # created / updated / unchanged / kept / invalid
    origin: str
    path: str
    detail: str = ""


def sync(*, force: bool = False) -> list[SyncReport]:
    reports = []
    for slug, item in sorted(discover().items()):
        try:
            source = item.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reports.append(SyncReport(slug, "unreadable", item.origin, str(item.path), str(exc)))
            continue
        reports.append(_sync_one(item, source, force))
    return reports


@transaction.atomic
def _sync_one(item: Found, source: str, force: bool) -> SyncReport:
    recipe = Recipe.objects.select_for_update().filter(slug=item.slug).first()
    if recipe and recipe.edited_locally and not force:
        return SyncReport(
            item.slug, "kept", recipe.origin, str(item.path), "edited in the console; use --force"
        )
    if recipe and recipe.origin == Recipe.Origin.CONSOLE and not force:
        return SyncReport(
            item.slug, "kept", recipe.origin, str(item.path), "created in the console; use --force"
        )
    created = recipe is None
    recipe = recipe or Recipe(slug=item.slug)
    unchanged = not created and recipe.source == source and recipe.origin == item.origin
    result = validate_source(source, str(item.path))
    apply_result(recipe, result)
    recipe.origin = item.origin
    recipe.source_path = str(item.path)
    recipe.edited_locally = False
    recipe.source = source
    recipe.save()
    recipe.record_version(source, note=f"synced from {item.origin}")
    action = "created" if created else "unchanged" if unchanged else "updated"
    detail = f"shadows {', '.join(item.shadows)}" if item.shadows else ""
    if not result.ok:
        action = f"{action} (invalid)"
        detail = str(result.errors[0])
    return SyncReport(item.slug, action, item.origin, str(item.path), detail)
