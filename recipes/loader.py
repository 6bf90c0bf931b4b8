"""Recipe loading: source text -> a validated spec, by the kind whose the source is.

The catalogue knows no kind: it hands a `RecipeSource` to each registered kind in turn
(recipes.readers, the workflow that reads any YAML mapping asked last) and the first
that recognises it reads it (`LoopKind.reads`). ``load_recipe`` never raises for bad
input: every failure is reported as a :class:`Problem` carrying a field path and the
1-based line/column of that field (:mod:`recipes.yaml_reader` reads the YAML and its line
map once, for whichever kind asks).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from console.redact import plain_cause
from recipes import readers
from recipes.formats.resources import Resources
from recipes.problems import LoadResult, Problem, sort_problems
from recipes.yaml_reader import MAX_SOURCE_BYTES, LineMap, parse_yaml

__all__ = ["MAX_SOURCE_BYTES", "LoadResult", "Problem", "RecipeSource", "load_recipe"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReadOptions:
    """What reading depends on besides the text. ``provider_fallback=False`` says no default
    provider is configured: agent nodes that name no provider are then an error.
    ``provider_check(name)`` says why a named provider (None: the default) cannot answer,
    or None. ``resources`` says where command files, named scripts and included workflows
    are (``commands_dirs`` alone is enough without those)."""

    commands_dirs: Sequence[Path] = ()
    provider_fallback: bool | Callable[[], bool] = True  # asked only by a kind that needs it
    resources: Resources | None = None
    provider_check: Callable[[str | None], str | None] | None = None

    def default_provider(self) -> bool:
        """Whether agent nodes that name no provider have one."""
        fallback = self.provider_fallback
        return fallback() if callable(fallback) else fallback


class RecipeSource:
    """A recipe's text as the kinds read it: its path (a Python recipe is a `.py` file) and,
    for a YAML kind, the YAML decoded once with its line map."""

    def __init__(self, text: str, path: str = "", options: ReadOptions | None = None):
        self.text = text
        self.path = path
        self.options = options or ReadOptions()

    @cached_property
    def _yaml(self) -> tuple[object, LineMap, list[Problem]]:
        return parse_yaml(self.text)

    @property
    def data(self) -> object:
        """The decoded YAML (None when it did not decode)."""
        return self._yaml[0]

    @property
    def lines(self) -> LineMap:
        return self._yaml[1]

    @property
    def yaml_problems(self) -> list[Problem]:
        return self._yaml[2]

    @property
    def decoded(self) -> bool:
        """Whether a kind asked for the YAML (so its problems belong to the answer)."""
        return "_yaml" in self.__dict__  # cached_property keeps its value there

    @property
    def mapping(self) -> dict | None:
        """The decoded YAML when it is a mapping of fields, the shape every YAML kind has."""
        return self.data if isinstance(self.data, dict) else None


def load_recipe(
    source: str,
    *,
    source_path: str = "",
    commands_dirs: Sequence[Path] = (),
    provider_fallback: bool | Callable[[], bool] = True,
    resources: Resources | None = None,
    provider_check=None,
) -> LoadResult:
    """Parse and validate a recipe (ReadOptions says what the options mean). Never raises
    for bad input."""
    options = ReadOptions(commands_dirs, provider_fallback, resources, provider_check)
    recipe = RecipeSource(source, source_path, options)
    for kind in readers.readers():
        try:
            result = kind.reads(recipe)
        except Exception as exc:  # last-resort guard: never raise on input
            log.exception("could not validate a recipe")
            problem = Problem("", 1, 1, f"could not validate recipe ({plain_cause(exc)})")
            result = LoadResult(kind=kind.name, spec=None, errors=[problem])
        if result is not None:
            return _with_yaml_problems(recipe, result) if kind.reads_yaml else result
    problem = Problem("", 1, 1, "no installed kind of loop reads this recipe")
    return LoadResult(kind="", spec=None, errors=[problem])


def _with_yaml_problems(recipe: RecipeSource, result: LoadResult) -> LoadResult:
    if not recipe.decoded or not recipe.yaml_problems:
        return result  # not read as YAML, or read cleanly
    # A value YAML could not read shows up as null below; keep only the YAML reason.
    broken = {p.path for p in recipe.yaml_problems}
    rest = [p for p in result.errors if p.path not in broken]
    result.errors = sort_problems([*recipe.yaml_problems, *rest])
    result.spec = None
    return result
