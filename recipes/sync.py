"""Synchronise recipe files into the database.

Sources, lowest precedence first: bundled (shipped in recipes/builtin), user (a folder in
the user's config directory), project (each folder of LOOP_RECIPE_DIRS). The same slug from
a higher source shadows a lower one. A recipe created or edited in the console is left
alone unless `force` is set (the rule lives in recipes.editing.load_file).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.utils.text import slugify

from recipes import editing
from recipes.layout import recipe_files, workflow_folder
from recipes.models import Recipe
from recipes.sources import (
    BUILTIN_DIR,
    kinds_user_dirs,
    project_dirs,
    repository_recipe_dirs,
    user_dir,
)


@dataclass
class Found:
    slug: str
    origin: str
    path: Path
    shadows: list[str]


def slug_for(path: Path) -> str:
    """A recipe file's slug: a step-machine recipe's `id:` (its identity, whatever the file
    is called), else the file's name."""
    if path.suffix in (".yaml", ".yml") and (recipe_id := declared_id(path)):
        return recipe_id
    # Python files are named like modules (snake_case); their slugs read like the others.
    stem = path.stem.replace("_", "-") if path.suffix == ".py" else path.stem
    return slugify(stem)[:100] or "recipe"


def read_source(path: Path) -> str:
    """A recipe file's text. The file itself is opened without following a link and only
    when it is a regular file: a repository's `.planeai/loops` may be a tree an agent wrote
    (`isolation: project`), and a link there must not store a secret as a recipe's source
    (runs.sandbox.files). Its folder is trusted: a linked recipe folder still works."""
    from recipes.yaml_reader import MAX_SOURCE_BYTES
    from runs.sandbox import files

    read = files.read_file(path.parent, path.name, limit=MAX_SOURCE_BYTES + 1)
    return read.data.decode("utf-8")


def declared_id(path: Path) -> str:
    """The slug a recipe file names itself by (a step machine's `id:`; LoopKind.slug_in),
    or "" when its kind lets the file's name choose."""
    from recipes import readers
    from recipes.editing import SLUG_PATTERN
    from recipes.loader import RecipeSource

    try:
        source = RecipeSource(read_source(path), str(path))
    except (OSError, UnicodeDecodeError):
        return ""
    for kind in readers.readers():
        recipe_id = kind.slug_in(source)
        if recipe_id is not None:
            return recipe_id if SLUG_PATTERN.match(recipe_id) else ""
    return ""


def discover(repositories: tuple = ()) -> dict[str, Found]:
    """Every recipe file by slug, the highest precedence winning; `repositories`: a run's own
    repositories, whose kinds' folders come first (recipes.sources.repository_recipe_dirs:
    a step machine's `.planeai/loops/`)."""
    found: dict[str, Found] = {}
    sources = [
        (Recipe.Origin.BUILTIN, [BUILTIN_DIR]),
        (Recipe.Origin.USER, list(dict.fromkeys([user_dir(), *kinds_user_dirs()]))),
        # Like PATH, the first folder listed in LOOP_RECIPE_DIRS wins; visiting the list
        # backwards lets it overwrite the ones listed after it.
        # A project folder may be a repository root: its recipes are in .archon/workflows.
        (Recipe.Origin.PROJECT, [workflow_folder(p) for p in reversed(project_dirs())]),
        # A repository's own recipe folders come last, so they win over everything.
        (Recipe.Origin.PROJECT, list(reversed(repository_recipe_dirs(repositories)))),
    ]
    for origin, folders in sources:
        for folder in folders:
            # Subfolders too (packs, groups); in one folder the shallowest file of a name wins.
            for path in reversed(recipe_files(folder)):
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
            source = read_source(item.path)
        except (OSError, UnicodeDecodeError) as exc:
            reports.append(SyncReport(slug, "unreadable", item.origin, str(item.path), str(exc)))
            continue
        reports.append(_sync_one(item, source, force))
    return reports


def _sync_one(item: Found, source: str, force: bool) -> SyncReport:
    loaded = editing.load_file(
        item.slug,
        source,
        origin=item.origin,
        source_path=str(item.path),
        note=f"synced from {item.origin}",
        force=force,
    )
    if loaded.action == "kept":
        detail = f"{loaded.reason}; use --force"
        return SyncReport(item.slug, "kept", loaded.recipe.origin, str(item.path), detail)
    action = loaded.action
    detail = f"shadows {', '.join(item.shadows)}" if item.shadows else ""
    if not loaded.result.ok:
        action = f"{action} (invalid)"
        detail = str(loaded.result.errors[0])
    return SyncReport(item.slug, action, item.origin, str(item.path), detail)
