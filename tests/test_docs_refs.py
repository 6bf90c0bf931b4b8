"""docs/architecture.md walks "Accept & complete" through the code with file:line
references. Each is written `symbol` (`path:line`), and the line (or one within two of
it) must still name the symbol: when code moves, this says which reference moved where."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
SLACK = 2
# `symbol` (`path:line`): the symbol's backticks, then the reference in parentheses.
REFERENCE = re.compile(
    r"`(?P<symbol>[^`]+)`\s*\(`(?P<path>[\w./-]+\.(?:py|html|js)):(?P<line>\d+)`\)"
)
# Any file:line at all, to catch one written another way (it would go unchecked).
ANY_FILE_LINE = re.compile(r"[\w./-]+\.(?:py|html|js):\d+")


def needles(symbol: str) -> list[str]:
    """What the code line must contain: the symbol as written (without call arguments),
    or its last dotted part (`Gate.decide` is `def decide` in gate.py)."""
    bare = symbol.split("(", 1)[0].strip()
    return list(dict.fromkeys([bare, bare.rsplit(".", 1)[-1]]))


def names(line: str, symbol: str) -> bool:
    return any(re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", line) for n in needles(symbol))


def where_now(lines: list[str], symbol: str) -> list[int]:
    """Lines of the file that name the symbol, its definition first."""
    found = [number for number, line in enumerate(lines, 1) if names(line, symbol)]
    last = needles(symbol)[-1]
    defined = [n for n in found if re.search(rf"\b(def|class)\s+{re.escape(last)}\b", lines[n - 1])]
    return defined + [n for n in found if n not in defined]


def check(doc_text: str, root: Path = ROOT) -> list[str]:
    problems = []
    paired = set()
    for match in REFERENCE.finditer(doc_text):
        symbol, path, number = match["symbol"], match["path"], int(match["line"])
        paired.add(match.start("path"))
        at = f"docs/architecture.md:{doc_text.count(chr(10), 0, match.start()) + 1}"
        ref = f"`{symbol}` (`{path}:{number}`)"
        source = root / path
        if not source.is_file():
            problems.append(f"{at}: {ref}: {path} does not exist")
            continue
        lines = source.read_text().splitlines()
        window = range(max(1, number - SLACK), min(len(lines), number + SLACK) + 1)
        if any(names(lines[n - 1], symbol) for n in window):
            continue
        shown = lines[number - 1].strip() if number <= len(lines) else "(past the end)"
        moved = where_now(lines, symbol)
        to = (
            f"now at {', '.join(f'{path}:{n}' for n in moved[:5])}"
            if moved
            else f"{path} no longer names {needles(symbol)[-1]!r}"
        )
        problems.append(f"{at}: {ref} moved: line {number} is {shown!r}; {to}")
    for match in ANY_FILE_LINE.finditer(doc_text):
        start = match.start()
        if not any(start <= p < match.end() for p in paired):
            at = f"docs/architecture.md:{doc_text.count(chr(10), 0, start) + 1}"
            problems.append(
                f"{at}: {match.group()} is not written `symbol` (`path:line`), so it goes unchecked"
            )
    return problems


def test_every_file_line_reference_of_the_architecture_page_names_its_symbol():
    text = DOC.read_text()
    assert len(list(REFERENCE.finditer(text))) >= 20  # the walk-through is still there
    problems = check(text)
    assert not problems, "\n".join(problems)


def test_a_moved_reference_says_where_it_went(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "views.py").write_text("import x\n\n\n\n\n\n\ndef gate_approve():\n")
    doc = (
        "`gate_approve` (`runs/views.py:8`) is right; `gate_approve` (`runs/views.py:1`) "
        "moved; `gone` (`runs/views.py:8`) and runs/views.py:3 are not."
    )
    assert check(doc, tmp_path) == [
        "docs/architecture.md:1: `gate_approve` (`runs/views.py:1`) moved: line 1 is "
        "'import x'; now at runs/views.py:8",
        "docs/architecture.md:1: `gone` (`runs/views.py:8`) moved: line 8 is "
        "'def gate_approve():'; runs/views.py no longer names 'gone'",
        "docs/architecture.md:1: runs/views.py:3 is not written `symbol` (`path:line`), "
        "so it goes unchecked",
    ]
