"""What validation says about a recipe: positioned problems and the result of loading.

Pure Python, shared by every recipe format: a :class:`LineMap` ties field paths to the
lines the author wrote, so each :class:`Problem` points at the line to fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = [
    "LineMap",
    "LoadResult",
    "Problem",
    "child_path",
    "short_repr",
    "sort_problems",
]


@dataclass(frozen=True)
class Problem:
    """One error or warning about a recipe, tied to a field path and a position."""

    path: str
    line: int | None
    column: int | None
    message: str

    def as_dict(self) -> dict:
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "message": self.message,
        }

    def __str__(self) -> str:
        parts = []
        if self.line is not None:
            parts.append(f"line {self.line}")
        if self.path:
            parts.append(self.path)
        prefix = ", ".join(parts)
        return f"{prefix}: {self.message}" if prefix else self.message


@dataclass
class LoadResult:
    kind: str
    spec: object | None
    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


_MAX_KEY_IN_PATH = 64


def child_path(parent: str, key: str | int) -> str:
    """Path of ``key`` inside ``parent``: ``a.b`` for mapping keys, ``a[3]`` for items.

    Absurdly long keys are abbreviated so hostile input cannot inflate every path.
    """
    if isinstance(key, int):
        return f"{parent}[{key}]"
    key = str(key)
    if len(key) > _MAX_KEY_IN_PATH:
        key = key[: _MAX_KEY_IN_PATH - 1] + "…"
    return f"{parent}.{key}" if parent else key


def short_repr(value: object, limit: int = 60) -> str:
    """``repr`` for messages, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _parent_path(path: str) -> str | None:
    """``nodes[2].loop`` -> ``nodes[2]`` -> ``nodes`` -> ``""`` -> ``None``."""
    if not path:
        return None
    cut = path.rfind("[") if path.endswith("]") else path.rfind(".")
    return path[:cut] if cut > 0 else ""


class LineMap:
    """Maps field paths to 1-based ``(line, column)`` positions in the source.

    For a mapping entry the position is that of its key; for a list item it is the
    start of the item.  :meth:`locate` falls back to the nearest recorded ancestor,
    so a missing field points at the mapping that should have contained it.
    """

    def __init__(self, positions: dict[str, tuple[int, int]] | None = None):
        self._positions: dict[str, tuple[int, int]] = dict(positions or {})
        self._blocks: set[str] = set()  # block scalars (| or >): their text starts below

    def mark_block(self, path: str) -> None:
        self._blocks.add(path)

    def is_block(self, path: str) -> bool:
        return path in self._blocks

    def set(self, path: str, line: int, column: int) -> None:
        self._positions.setdefault(path, (line, column))

    def get(self, path: str) -> tuple[int, int] | None:
        return self._positions.get(path)

    def __contains__(self, path: object) -> bool:
        return path in self._positions

    def __len__(self) -> int:
        return len(self._positions)

    def locate(self, path: str) -> tuple[int | None, int | None]:
        current: str | None = path
        while current is not None:
            found = self._positions.get(current)
            if found is not None:
                return found
            current = _parent_path(current)
        return (None, None)

    def line(self, path: str) -> int | None:
        return self.locate(path)[0]

    def problem(self, path: str, message: str) -> Problem:
        line, column = self.locate(path)
        return Problem(path=path, line=line, column=column, message=message)


def sort_problems(problems: Sequence[Problem]) -> list[Problem]:
    """Order by line (unpositioned problems last), keeping insertion order on ties."""
    big = 1 << 62
    return sorted(problems, key=lambda p: p.line if p.line is not None else big)
