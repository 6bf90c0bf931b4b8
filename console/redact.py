"""Server paths kept out of what people read: recipe problems name folders by what they
are (``<user recipes>/commands``), not where they sit on the server's disk."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings


def _labelled_roots() -> list[tuple[str, str]]:
    from recipes.layout import archon_dir_of_project
    from recipes.sources import BUILTIN_DIR, project_dirs, user_dir

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


# What an unexpected exception is called on a page: its kind in plain words. The class
# name, the message (which may quote paths, queries or a server's answer) and the
# traceback go to the log.
PLAIN_CAUSES: list[tuple[type[BaseException], str]] = [
    (RecursionError, "the input nests too deeply"),
    (MemoryError, "the worker ran out of memory"),
    (TimeoutError, "an operation timed out"),
    (UnicodeError, "text that is not valid UTF-8"),
    (PermissionError, "permission denied"),
]


def plain_cause(exc: BaseException) -> str:
    """A viewer-safe description of an unexpected error: an OS error's reason without the
    file name, else what kind of failure it was; never the class name or a path."""
    for kind, words in PLAIN_CAUSES:
        if isinstance(exc, kind):
            return words
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[:1].lower() + exc.strerror[1:]
    return "an unexpected error in the engine"
