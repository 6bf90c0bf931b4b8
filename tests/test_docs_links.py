"""The README and docs/ point only at files (and headings) that exist, and the project
speaks of its own formats only: no comment, template or page names outside seed material
("seed 003", a `seeds/` folder). Issue 10, defect 9: the README pointed at an
ARCHITECTURE.md that was never in the repository, and comments named "seed 003"."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# [text](target), the text possibly wrapped over lines; external and mail links aside.
LINK = re.compile(r"\]\(\s*([^)\s]+)\s*\)")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)
# A file named in prose: `docs/x.md`, or an all-capitals root file like ARCHITECTURE.md.
NAMED_FILE = re.compile(r"(?<![\w/.-])((?:docs/[\w-]+|[A-Z][A-Z_-]+)\.md)\b")
OWN_FORMATS_ONLY = ["console", "runs", "recipes", "loops", "notifications", "docs"]
FOREIGN = re.compile(r"\bseed\s*0\d*\b|\bseeds/", re.IGNORECASE)


def heading_anchors(path: Path) -> set[str]:
    """GitHub's anchors: lower case, punctuation dropped, spaces to hyphens."""
    anchors = set()
    in_code = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        title = re.sub(r"[^\w\- ]", "", title)
        anchors.add(title.replace(" ", "-"))
    return anchors


def broken_links(docs: list[Path], root: Path = ROOT) -> list[str]:
    broken = []
    for doc in docs:
        text = doc.read_text()
        for match in LINK.finditer(text):
            target = match.group(1)
            if EXTERNAL.match(target):
                continue
            line = text.count("\n", 0, match.start()) + 1
            where = f"{doc.relative_to(root)}:{line}: ({target})"
            file_part, _, anchor = target.partition("#")
            linked = (doc.parent / file_part).resolve() if file_part else doc
            if not linked.is_file():
                broken.append(f"{where} no such file")
            elif anchor and linked.suffix == ".md" and anchor not in heading_anchors(linked):
                broken.append(f"{where} no heading #{anchor} in {linked.relative_to(root)}")
        for match in NAMED_FILE.finditer(text):
            if not (root / match.group(1)).is_file():
                line = text.count("\n", 0, match.start()) + 1
                broken.append(f"{doc.relative_to(root)}:{line}: names {match.group(1)}, not here")
    return broken


def test_every_relative_link_in_the_readme_and_docs_resolves():
    assert broken_links(DOCS) == []


def test_the_link_check_catches_a_missing_file(tmp_path):
    doc = tmp_path / "README.md"
    doc.write_text("Read [the architecture](\nARCHITECTURE.md) and [this](#nowhere).\n")
    found = broken_links([doc], root=tmp_path)
    assert found == [
        "README.md:1: (ARCHITECTURE.md) no such file",
        "README.md:2: (#nowhere) no heading #nowhere in README.md",
        "README.md:2: names ARCHITECTURE.md, not here",
    ]


def test_nothing_names_seed_material():
    found = []
    files = [ROOT / "README.md"]
    for folder in OWN_FORMATS_ONLY:
        files += [p for p in sorted((ROOT / folder).rglob("*")) if p.is_file()]
    for path in files:
        if "__pycache__" in path.parts or path.suffix in {".pyc", ".png", ".woff2", ".ico"}:
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if FOREIGN.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []
