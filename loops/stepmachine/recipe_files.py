"""A recipe by id as `manage.py loop` finds it: the one place `loop recipe ls`, `show`,
`validate` and `loop create` read recipes from, so what `validate` says is what `create`
does.

The file on disk wins, in the precedence of recipes.sync.discover (first match by id: a
run's repository's `.planeai/loops/`, the current repository's and LOOP_REPOSITORIES',
LOOP_RECIPE_DIRS, the user's folders, the bundled ones). A recipe the console loaded from a
file those folders do not reach now (a run's `--repository` elsewhere) is read from that
file still. The console's copy counts only where there is no file, or where the console
keeps its own edit over the file (recipes.editing.kept_from_files)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from recipes.editing import kept_from_files, load_file
from recipes.models import Recipe
from recipes.problems import LoadResult, Problem
from recipes.validation import validate_source

SCANNED = "scanned"  # a file in the folders searched now
REMEMBERED = "remembered"  # the file the console loaded it from, outside those folders
CONSOLE = "console"  # no file: the console's copy


@dataclass
class RecipeFile:
    id: str
    origin: str
    path: str  # "" when the recipe never had a file
    found: str  # SCANNED, REMEMBERED or CONSOLE
    stored: Recipe | None  # the console's copy, if it has one
    file_text: str | None  # None: no file, or it could not be read (`unreadable` says why)
    unreadable: str = ""
    shadows: list[str] = field(default_factory=list)

    @property
    def kept(self) -> str:
        """Why the console's copy runs instead of the file ("" when the file does)."""
        if self.found == CONSOLE or self.stored is None or self.stored.source == self.file_text:
            return ""
        return kept_from_files(self.stored)

    @property
    def text(self) -> str | None:
        """What `loop create` runs: the file, else the console's copy."""
        if self.found == CONSOLE or self.kept:
            return self.stored.source
        return self.file_text

    @cached_property
    def result(self) -> LoadResult:
        if self.text is None:
            kind = self.stored.kind if self.stored else ""
            problem = Problem("", None, None, f"cannot read {self.path}: {self.unreadable}")
            return LoadResult(kind=kind, spec=None, errors=[problem])
        return validate_source(self.text, self.path)

    @property
    def name(self) -> str:
        return getattr(self.result.spec, "name", "") or (self.stored and self.stored.name) or ""

    @property
    def state(self) -> str:
        """How the console's copy stands against the file."""
        if self.found == CONSOLE:
            if not self.path:
                return "console only"
            return "file names another id now" if Path(self.path).exists() else "file gone"
        if self.stored is None:
            return "not synced"
        if self.stored.source == self.file_text and self.stored.source_path == self.path:
            return "synced"
        if self.kept:
            return f"kept: {self.kept}"
        return "changed since sync"

    def load(self) -> Recipe | None:
        """The console's recipe of this id, its file loaded into the catalogue first (what
        `recipe sync` does for it): a run is made from what is on disk now."""
        if self.found == CONSOLE or self.kept:
            return self.stored
        loaded = load_file(
            self.id, self.text, origin=self.origin, source_path=self.path,
            note=f"synced from {self.origin}",
        )  # fmt: skip
        return loaded.recipe


def recipe_files(repositories: tuple = ()) -> dict[str, RecipeFile]:
    """Every recipe by id, as the module says; `repositories`: a run's own, searched first."""
    from recipes.sync import discover

    stored = {recipe.slug: recipe for recipe in Recipe.objects.all()}
    found = {
        slug: _read(slug, item.origin, item.path, SCANNED, stored.get(slug), item.shadows)
        for slug, item in discover(repositories).items()
    }
    for slug, recipe in stored.items():
        if slug not in found:
            found[slug] = _remembered(recipe)
    return dict(sorted(found.items()))


def recipe_file(recipe_id: str, repositories: tuple = ()) -> RecipeFile | None:
    """The recipe `recipe_id` (None when there is none), by the one rule above."""
    return recipe_files(repositories).get(recipe_id)


def _read(slug, origin, path: Path, found: str, stored, shadows=()) -> RecipeFile:
    from recipes.sync import read_source

    try:
        text, unreadable = read_source(path), ""
    except (OSError, UnicodeDecodeError) as exc:
        text, unreadable = None, str(exc)
    return RecipeFile(slug, origin, str(path), found, stored, text, unreadable, list(shadows))


def _remembered(recipe: Recipe) -> RecipeFile:
    """A recipe the folders searched now do not have: its file, if it still names itself by
    this id, else the console's copy."""
    from recipes.sync import slug_for

    path = Path(recipe.source_path) if recipe.source_path else None
    if path is not None and path.is_file() and slug_for(path) == recipe.slug:
        return _read(recipe.slug, recipe.origin, path, REMEMBERED, recipe)
    return RecipeFile(recipe.slug, recipe.origin, recipe.source_path, CONSOLE, recipe, None)
