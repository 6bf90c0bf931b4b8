"""Line diffs between two recipe versions, as plain rows a template can render escaped."""

from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "hunk", "add", "remove", "same", "header"
    text: str
    old_number: int | None = None
    new_number: int | None = None


def unified(old: str, new: str, old_label: str, new_label: str, context: int = 3) -> list[DiffLine]:
    """A unified diff with line numbers on both sides; empty when the texts are equal."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    rows: list[DiffLine] = []
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        first, last = group[0], group[-1]
        rows.append(
            DiffLine(
                "hunk",
                f"@@ -{first[1] + 1},{last[2] - first[1]} +{first[3] + 1},{last[4] - first[3]} @@",
            )
        )
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                rows += [
                    DiffLine("same", old_lines[i], i + 1, j + 1)
                    for i, j in zip(range(i1, i2), range(j1, j2), strict=True)
                ]
                continue
            rows += [DiffLine("remove", old_lines[i], i + 1, None) for i in range(i1, i2)]
            rows += [DiffLine("add", new_lines[j], None, j + 1) for j in range(j1, j2)]
    if rows:
        rows[:0] = [DiffLine("header", f"--- {old_label}"), DiffLine("header", f"+++ {new_label}")]
    return rows


def stats(rows: list[DiffLine]) -> dict:
    return {
        "added": sum(1 for r in rows if r.kind == "add"),
        "removed": sum(1 for r in rows if r.kind == "remove"),
    }


def compare(versions: dict, a, b) -> dict:
    """Pick two versions (by number, as typed in a URL) and diff them: newest against the
    one before when the numbers are missing or unknown. `versions` maps number -> version."""

    def pick(raw, default):
        try:
            number = int(raw)
        except (TypeError, ValueError):
            number = default
        return versions.get(number) or versions.get(default)

    latest = max(versions, default=None)
    new = pick(b, latest)
    old = pick(a, (new.number - 1) if new and new.number > 1 else latest)
    rows = (
        unified(old.source, new.source, f"v{old.number}", f"v{new.number}") if old and new else []
    )
    return {
        "numbers": sorted(versions, reverse=True),
        "old": old,
        "new": new,
        "rows": rows,
        "stats": stats(rows),
    }


@dataclass(frozen=True)
class SideBySide:
    kind: str  # "same", "change", "add", "remove", "hunk"
    old: str | None = None
    new: str | None = None
    old_number: int | None = None
    new_number: int | None = None


def side_by_side(old: str, new: str, context: int = 3) -> list[SideBySide]:
    """The same hunks as `unified`, as rows of two columns (a changed line pairs with the
    line that replaced it); empty when the texts are equal."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    rows: list[SideBySide] = []
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        first = group[0]
        rows.append(SideBySide("hunk", f"line {first[1] + 1}", f"line {first[3] + 1}"))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                rows += [
                    SideBySide("same", old_lines[i], new_lines[j], i + 1, j + 1)
                    for i, j in zip(range(i1, i2), range(j1, j2), strict=True)
                ]
                continue
            left, right = list(range(i1, i2)), list(range(j1, j2))
            for n in range(max(len(left), len(right))):
                i = left[n] if n < len(left) else None
                j = right[n] if n < len(right) else None
                kind = (
                    "change"
                    if i is not None and j is not None
                    else "remove"
                    if j is None
                    else "add"
                )
                rows.append(
                    SideBySide(
                        kind,
                        old_lines[i] if i is not None else None,
                        new_lines[j] if j is not None else None,
                        i + 1 if i is not None else None,
                        j + 1 if j is not None else None,
                    )
                )
    return rows
