"""docs/architecture.md walks "Accept & complete" through the code by symbol. Each reference
is written `symbol` (`path`), and the file must still name the symbol: when code is renamed
or moved to another file, this says which reference went stale. Line numbers are not
written (they move with every edit above them), and one written anyway is reported."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
# `symbol` (`path`): the symbol's backticks, then the file in parentheses.
REFERENCE = re.compile(r"`(?P<symbol>[^`]+)`\s*\(`(?P<path>[\w./-]+\.(?:py|html|js))`\)")
# A file:line anywhere, which would go stale silently.
ANY_FILE_LINE = re.compile(r"[\w./-]+\.(?:py|html|js):\d+")


def needles(symbol: str) -> list[str]:
    """What the file must contain: the symbol as written (without call arguments), or its
    last dotted part (`Gate.decide` is `def decide` in gate.py)."""
    bare = symbol.split("(", 1)[0].strip()
    return list(dict.fromkeys([bare, bare.rsplit(".", 1)[-1]]))


def names(text: str, symbol: str) -> bool:
    return any(re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text) for n in needles(symbol))


def check(doc_text: str, root: Path = ROOT) -> list[str]:
    problems = []
    for match in REFERENCE.finditer(doc_text):
        symbol, path = match["symbol"], match["path"]
        at = f"docs/architecture.md:{doc_text.count(chr(10), 0, match.start()) + 1}"
        source = root / path
        if not source.is_file():
            problems.append(f"{at}: `{symbol}` (`{path}`): {path} does not exist")
        elif not names(source.read_text(), symbol):
            problems.append(
                f"{at}: `{symbol}` (`{path}`): {path} no longer names {needles(symbol)[-1]!r}"
            )
    for match in ANY_FILE_LINE.finditer(doc_text):
        at = f"docs/architecture.md:{doc_text.count(chr(10), 0, match.start()) + 1}"
        problems.append(f"{at}: {match.group()}: write `symbol` (`path`), without a line number")
    return problems


def test_every_reference_of_the_architecture_page_names_a_symbol_its_file_has():
    text = DOC.read_text()
    assert len(list(REFERENCE.finditer(text))) >= 20  # the walk-through is still there
    problems = check(text)
    assert not problems, "\n".join(problems)


def test_a_stale_reference_says_what_is_missing(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "views.py").write_text("import x\n\n\ndef gate_approve():\n")
    doc = (
        "`gate_approve` (`runs/views.py`) is right; `gone` (`runs/views.py`), "
        "`x` (`runs/none.py`) and runs/views.py:3 are not."
    )
    assert check(doc, tmp_path) == [
        "docs/architecture.md:1: `gone` (`runs/views.py`): runs/views.py no longer names 'gone'",
        "docs/architecture.md:1: `x` (`runs/none.py`): runs/none.py does not exist",
        "docs/architecture.md:1: runs/views.py:3: write `symbol` (`path`), without a line number",
    ]
