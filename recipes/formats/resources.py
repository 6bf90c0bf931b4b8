"""What a recipe may refer to outside itself: command files, named scripts, other workflows.

The loader knows no settings: recipes.sources builds these for a recipe file (its
repository's folders, the user's, the bundled ones), tests build them by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Resources:
    source_path: str = ""  # the recipe file these are for ("" for a recipe without one)
    commands_dirs: tuple[Path, ...] = ()
    scripts_dirs: tuple[Path, ...] = ()
    # Where included workflows are looked for (named in "not found" errors), and the lookup.
    workflow_dirs: tuple[Path, ...] = ()
    find_workflow: Callable[[str], Path | None] | None = None
    # The resources of another recipe file: an included workflow keeps its own folders.
    for_file: Callable[[str], Resources] | None = None
    # The repository's `.archon/config.yaml` (recipes.formats.repo_config): model aliases
    # (`@mini` -> provider and model) and its default assistant; why it could not be read.
    model_aliases: dict = field(default_factory=dict, hash=False, compare=False)
    default_assistant: str = ""
    config_problem: str = ""

    def of_file(self, path: Path) -> Resources:
        return self.for_file(str(path)) if self.for_file is not None else self


def folders_text(folders) -> str:
    return ", ".join(str(f) for f in folders)
