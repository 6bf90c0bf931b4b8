"""No function or method of the project's code is longer than 60 lines, decorators
through its last line (issue 35: size by idea, not by file). A longer one is split into
helpers that each do one thing, or, where splitting would hurt reading (a flat list, say),
the line just above it (above its first decorator, if any) gives the reason:

    # long: one flat list of the command's options, read top to bottom
    def add_arguments(self, parser): ...

Read with `ast`; tests/, bench/ and migrations are not the project's code here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("console", "recipes", "runs", "loops", "notifications")
MOST_LINES = 60
REASON = "# long:"


def functions(tree: ast.AST) -> Iterable[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every function of a module, methods and nested functions included."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def first_line(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    return min([function.lineno, *(d.lineno for d in function.decorator_list)])


def has_reason(lines: list[str], function) -> bool:
    """The line above the function is `# long: <why>`, with a why."""
    above = first_line(function) - 2  # 0-based index of the line before it
    if above < 0:
        return False
    comment = lines[above].strip()
    return comment.startswith(REASON) and bool(comment[len(REASON) :].strip())


def long_functions(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> dict[str, int]:
    """`path: name` -> lines, for each function of `packages` over MOST_LINES lines
    that gives no reason."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" in path.relative_to(root).parts:
                continue
            text = path.read_text()
            lines = text.splitlines()
            for function in functions(ast.parse(text, filename=str(path))):
                size = function.end_lineno - first_line(function) + 1
                if size > MOST_LINES and not has_reason(lines, function):
                    found[f"{path.relative_to(root).as_posix()}: {function.name}"] = size
    return found


def test_no_function_is_over_60_lines():
    long = long_functions()
    assert not long, f"split these functions, or say why not (`{REASON}`): {long}"


def test_every_package_is_there():
    assert all((ROOT / package / "__init__.py").is_file() for package in PACKAGES)


# The checker itself, on a small tree of its own.


def body(lines: int, indent: str = "    ") -> str:
    """A function body of `lines` lines."""
    return "".join(f"{indent}x{n} = {n}\n" for n in range(lines))


TOY = {
    # 1 + 59 lines: just fits.
    "alpha/fits.py": "def fits():\n" + body(59),
    # a decorator counts: 1 + 1 + 59 lines.
    "alpha/decorated.py": "@staticmethod\ndef decorated():\n" + body(59),
    # a method, and a reason above the next one's decorator.
    "alpha/methods.py": (
        "class A:\n    def method(self):\n"
        + body(61, indent=" " * 8)
        + "\n    # long: a flat table, read top to bottom\n    @property\n    def table(self):\n"
        + body(61, indent=" " * 8)
    ),
    # a reason with no why is no reason.
    "beta/bare.py": "# long:\ndef bare():\n" + body(61),
    "beta/migrations/0001_initial.py": "def migrate():\n" + body(99),
}


def test_the_checker_measures_each_function(tmp_path):
    for name, text in TOY.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert long_functions(tmp_path, ("alpha", "beta")) == {
        "alpha/decorated.py: decorated": 61,
        "alpha/methods.py: method": 62,
        "beta/bare.py: bare": 62,
    }
