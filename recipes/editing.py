"""The one way recipes are created and changed: admin, API, CLI and sync all call here.

So "an invalid source is refused, every saved change is a new version, a synced recipe
edited in the console is protected from the next file load, changing shell needs the shell
permission" lives here once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils.text import slugify

from console.models import Project
from recipes import readers
from recipes.loader import LoadResult, Problem
from recipes.models import Recipe
from recipes.shell_parts import SHELL_PERMISSION, shell_changes, shell_parts
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


class ShellNotAllowed(PermissionError):
    """The change adds, removes or alters shell, and the person lacks the shell permission."""

    def __init__(self, where: list[str]):
        shown = ", ".join(where[:5]) + (f" and {len(where) - 5} more" if len(where) > 5 else "")
        super().__init__(
            f"Changing shell in a recipe ({shown}) needs the 'recipe author with shell' role: "
            "bash steps, until_bash checks, command and inline providers run on the workers. "
            "You may change prompts, descriptions and everything else."
        )
        self.where = where


def check_shell_permission(
    user, before: LoadResult | None, after: LoadResult, *, where, old: str = "", new: str = ""
) -> None:
    """Refuse a save by `user` whose shell parts differ from the current version's (`old`
    and `new` are the two sources), unless `user` writes shell in `where` (the recipe, or
    the project a new one goes to: console.projects). No user is the system itself (a sync
    of recipe folders, a file given on the command line)."""
    if user is None or user.has_perm(SHELL_PERMISSION, where):
        return
    changed = shell_changes(shell_parts(before, old), shell_parts(after, new))
    if changed:
        raise ShellNotAllowed(changed)


class SlugInvalid(ValueError):
    pass


def check_slug(slug: str) -> str:
    if not slug or len(slug) > 100 or not SLUG_PATTERN.match(slug):
        raise SlugInvalid(
            "A slug is 1-100 lowercase letters, digits, '-' or '_', starting and ending "
            "with a letter or digit."
        )
    return slug


def declared_slug(result: LoadResult) -> str | None:
    """The slug a recipe's kind says its recipes are known by (a step machine's `id:`)."""
    kind = readers.find(result.kind)
    return kind.declared_slug(result.spec) if kind is not None and result.spec else None


def slug_from(result: LoadResult, fallback: str = "recipe") -> str:
    if declared := declared_slug(result):
        return declared
    name = getattr(result.spec, "name", "") if result.spec is not None else ""
    return (slugify(name) or slugify(fallback) or "recipe")[:100].strip("-_") or "recipe"


def save_source(recipe: Recipe, source: str, *, user=None, note: str = "") -> LoadResult:
    """Validate and make `source` the recipe's current version; refuse it when it has errors."""
    if (read_only := recipe.source_read_only) and source != recipe.source:
        problem = Problem("", 1, 1, read_only)
        raise SourceInvalid(LoadResult(kind=recipe.kind, spec=None, errors=[problem]))
    result = validate_source(source, recipe.source_path, project_id=recipe.project_id)
    if not result.ok:
        raise SourceInvalid(result)
    # The stored source, not the instance's: the admin's form has already set it.
    stored = Recipe.objects.filter(pk=recipe.pk).values_list("source", flat=True).first()
    if user is not None and source != stored:
        before = (
            validate_source(stored, recipe.source_path, project_id=recipe.project_id)
            if stored is not None
            else None
        )
        check_shell_permission(user, before, result, where=recipe, old=stored or "", new=source)
    _same_identity(recipe, result)
    with transaction.atomic():
        apply_result(recipe, result)
        previous = recipe.current_version_id
        version = recipe.record_version(source, author=user, note=note[:200])
        if version.pk != previous and recipe.origin != Recipe.Origin.CONSOLE:
            # A synced recipe changed here is ours now: the next sync must not overwrite it.
            recipe.edited_locally = True
            recipe.save(update_fields=["edited_locally", "updated_at"])
    return result


def _same_identity(recipe: Recipe, result: LoadResult) -> None:
    """A recipe whose kind names it (a step machine's `id:`) keeps its name: changing it
    here would make this row answer to a name it no longer has."""
    declared = declared_slug(result)
    if declared is not None and declared != recipe.slug:
        problem = Problem(
            "id",
            1,
            1,
            f"this recipe's id is '{recipe.slug}'; a recipe keeps the id it declares "
            f"(create a new recipe for '{declared}')",
        )
        raise SourceInvalid(LoadResult(kind=result.kind, spec=None, errors=[problem]))


def _insert(
    slug: str,
    source: str,
    result: LoadResult,
    *,
    origin: str,
    source_path: str = "",
    enabled: bool = True,
    user=None,
    note: str,
    project=None,
) -> Recipe:
    """The only place a Recipe row is born: with its verdict and its first version (in
    `project`, else the default project)."""
    recipe = Recipe(
        slug=slug, source=source, origin=origin, enabled=enabled, source_path=source_path
    )
    if project is not None:
        recipe.project = project
    apply_result(recipe, result)
    recipe.save()
    recipe.record_version(source, author=user, note=note[:200])
    return recipe


def create_recipe(
    source: str,
    *,
    slug: str = "",
    user=None,
    note: str = "",
    enabled: bool = True,
    origin: str = Recipe.Origin.CONSOLE,
    source_path: str = "",
    project=None,
) -> tuple[Recipe, LoadResult]:
    """A new recipe from valid source (a console one unless told otherwise) in `project`
    (None: the default project); the slug defaults to the recipe's name. `source_path`
    locates its `commands/` folder."""
    project = project or Project.default()
    result = validate_source(source, source_path, project_id=project.pk)
    if not result.ok:
        raise SourceInvalid(result)
    check_shell_permission(user, None, result, where=project, new=source)
    slug = check_slug(slug) if slug else slug_from(result)
    declared = declared_slug(result)
    if declared is not None and slug != declared:
        raise SlugInvalid(f"This recipe is known by its id: its slug is '{declared}'.")
    try:
        with transaction.atomic():
            recipe = _insert(
                slug,
                source,
                result,
                origin=origin,
                source_path=source_path,
                enabled=enabled,
                user=user,
                note=note or "created",
                project=project,
            )
    except IntegrityError:
        raise SlugTaken(f"A recipe with the slug '{slug}' already exists.") from None
    return recipe, result


# --- recipe files (sync, `run start PATH`) ---------------------------------------------------


def kept_from_files(recipe: Recipe) -> str:
    """Why a recipe file may not overwrite `recipe` ("" when it may): the console's work
    wins over files unless the caller forces it."""
    if recipe.edited_locally:
        return "edited in the console"
    if recipe.origin == Recipe.Origin.CONSOLE:
        return "created in the console"
    return ""


@dataclass
class FileLoad:
    action: str  # created / updated / unchanged / kept
    recipe: Recipe
    result: LoadResult | None  # None when kept: the file was not read into the recipe
    reason: str = ""  # why it was kept


@transaction.atomic
def load_file(
    slug: str,
    source: str,
    *,
    origin: str,
    source_path: str,
    note: str,
    force: bool = False,
    require_valid: bool = False,
    user=None,
) -> FileLoad:
    """Make a recipe file's text the recipe `slug`, following the precedence rule: a recipe
    created or edited in the console is kept unless `force`. An invalid file is stored
    marked invalid (a folder's broken file shows up as broken), or refused with
    `require_valid`. Files are installed by whoever controls the folder; with `user` (the
    command line's --user) the change is also checked against that account's shell
    permission."""
    recipe = Recipe.objects.select_for_update().filter(slug=slug).first()
    if recipe is not None and not force:
        reason = kept_from_files(recipe)
        if reason:
            return FileLoad("kept", recipe, None, reason)
    project = recipe.project if recipe else Project.default()  # a new file's: the default
    result = validate_source(source, source_path, project_id=project.pk)
    if require_valid and not result.ok:
        raise SourceInvalid(result)
    if user is not None and (recipe is None or recipe.source != source):
        before = (
            validate_source(recipe.source, recipe.source_path, project_id=recipe.project_id)
            if recipe
            else None
        )
        old = recipe.source if recipe else ""
        check_shell_permission(user, before, result, where=project, old=old, new=source)
    if recipe is None:
        recipe = _insert(slug, source, result, origin=origin, source_path=source_path, note=note)
        return FileLoad("created", recipe, result)
    unchanged = recipe.source == source and recipe.origin == origin
    apply_result(recipe, result)
    recipe.origin = origin
    recipe.source_path = source_path
    recipe.edited_locally = False
    recipe.source = source
    recipe.save()
    recipe.record_version(source, note=note[:200])
    return FileLoad("unchanged" if unchanged else "updated", recipe, result)


def free_slug(base: str) -> str:
    base = base[:90]
    slug, n = base, 1
    while Recipe.objects.filter(slug=slug).exists():
        n += 1
        slug = f"{base}-{n}"
    return slug


def duplicate(recipe: Recipe, *, user=None) -> Recipe:
    """A console copy named `<slug>-copy` (or -copy-2, ...), starting a history of its own."""
    with transaction.atomic():
        return _insert(
            free_slug(f"{recipe.slug}-copy"),
            recipe.source,
            validate_source(recipe.source, recipe.source_path, project_id=recipe.project_id),
            origin=Recipe.Origin.CONSOLE,
            source_path=recipe.source_path,
            enabled=recipe.enabled,
            user=user,
            note=f"duplicated from {recipe.slug}",
            project=recipe.project,
        )
