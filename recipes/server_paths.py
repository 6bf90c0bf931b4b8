"""Server paths kept out of what people read: recipe problems name folders by what they
are (``<user recipes>/commands``), not where they sit on the server's disk."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from recipes.layout import archon_dir_of_project
from recipes.sources import BUILTIN_DIR, project_dirs, user_dir


def _labelled_roots() -> list[tuple[str, str]]:
    roots: list[tuple[Path, str]] = [
        (BUILTIN_DIR, "<bundled recipes>"),
        (user_dir(), "<user recipes>"),
        (Path(settings.LOOP_DATA_DIR), "<data folder>"),
        (Path(settings.BASE_DIR), "<console>"),
        (Path.home(), "~"),
    ]
    for number, project in enumerate(project_dirs(), start=1):
        label = (
            "<project recipes>" if len(settings.LOOP_RECIPE_DIRS) == 1 else f"<project {number}>"
        )
        archon = archon_dir_of_project(project)
        if archon is not None:  # a repository: name its folders from the repository's root
            single = len(settings.LOOP_RECIPE_DIRS) == 1
            repo = "<project repo>" if single else f"<project {number} repo>"
            roots += [(project, label), (archon.parent, repo)]
        else:
            roots += [(project, label), (project.parent, label + "/..")]
    pairs: dict[str, str] = {}
    for path, label in roots:
        for variant in {str(path), str(path.resolve())}:
            if len(variant) > 1:
                pairs.setdefault(variant, label)
    # Longest first, so a folder inside another gets its own, more precise label.
    return sorted(pairs.items(), key=lambda pair: -len(pair[0]))


def without_server_paths(text: str) -> str:
    if not text or "/" not in text and "\\" not in text:
        return text
    for path, label in _labelled_roots():
        text = text.replace(path, label)
    return text
