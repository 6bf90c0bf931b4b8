"""The project's static import graph, read with `ast`: which module imports which.

Every import counts, at module level or inside a function or a class: a function-level
import only moves the moment the dependency is paid, it does not remove it. `from x import
y` is an edge to the module `x.y` when `y` is a module, else to `x`; a literal
`importlib.import_module("x")` counts as `import x`. Migrations are left out (they name
the models of their time, not the code's dependencies).

    python -m tests.import_graph      # the cycles that span two apps, with their edges

Used by tests/kernel/test_kernel_imports.py.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The project's top-level packages; `loops` holds one app per kind of loop.
PACKAGES = ("runs", "recipes", "loops", "notifications", "triggers", "console")
NESTED_APPS = ("loops",)  # each package right under these is an app
SKIPPED_FOLDERS = {"migrations", "templates", "static", "__pycache__"}

Graph = dict[str, set[str]]


def app_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] in NESTED_APPS and len(parts) > 1:
        return ".".join(parts[:2])
    return parts[0]


def modules(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    """Dotted name -> file, for every module of `packages` under `root`."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if SKIPPED_FOLDERS.intersection(parts[:-1]):  # a module may be called templates
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _known(name: str, known: dict[str, Path]) -> str | None:
    """The module `name` stands for: itself, or the closest enclosing module we know."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _imported_names(tree: ast.AST, module: str, is_package: bool) -> Iterable[tuple[str, str]]:
    """(the module named, if it is one; else the module it is in) for each import."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                origin = ".".join(part for part in (base, node.module) if part)
            else:
                origin = node.module or ""
            yield from ((f"{origin}.{alias.name}", origin) for alias in node.names)
        elif isinstance(node, ast.Call) and _is_import_module(node.func) and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                yield first.value, first.value


def _is_import_module(func: ast.expr) -> bool:
    return (isinstance(func, ast.Name) and func.id == "import_module") or (
        isinstance(func, ast.Attribute) and func.attr == "import_module"
    )


def build(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> Graph:
    known = modules(root, packages)
    graph: Graph = {name: set() for name in known}
    for name, path in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for imported, container in _imported_names(tree, name, path.name == "__init__.py"):
            target = imported if imported in known else _known(container, known)
            if target and target != name:
                graph[name].add(target)
    return graph


def strongly_connected(graph: Graph) -> list[list[str]]:
    """Tarjan's algorithm, iterative (the graph is deep enough for Python's stack)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(sorted(component))
    return found


def cross_app_cycles(graph: Graph) -> list[tuple[list[str], list[str]]]:
    """Each strongly connected component holding modules of two apps or more, with its
    edges from one app to another (one of them is the edge to break)."""
    cycles = []
    for component in strongly_connected(graph):
        if len({app_of(m) for m in component}) < 2:
            continue
        members = set(component)
        edges = [
            f"{source} -> {target}"
            for source in component
            for target in sorted(graph[source] & members)
            if app_of(source) != app_of(target)
        ]
        cycles.append((component, edges))
    return cycles


def imports_of(graph: Graph, importer_app: str, forbidden: Iterable[str]) -> list[str]:
    """Edges from modules of `importer_app` to modules of the `forbidden` apps (a parent
    folder of apps, such as `loops`, forbids each app in it)."""
    forbidden = tuple(forbidden)

    def is_forbidden(app: str) -> bool:
        return any(app == name or app.startswith(name + ".") for name in forbidden)

    return sorted(
        f"{source} -> {target}"
        for source, targets in graph.items()
        if app_of(source) == importer_app
        for target in targets
        if is_forbidden(app_of(target))
    )


def main() -> None:
    graph = build()
    cycles = cross_app_cycles(graph)
    for component, edges in cycles:
        apps = sorted({app_of(m) for m in component})
        print(f"{len(component)} modules across {', '.join(apps)}")
        if "-v" in sys.argv:
            print("  " + " ".join(component))
        for edge in edges:
            print(f"    {edge}")
    if not cycles:
        print("no import cycle spans two apps")


if __name__ == "__main__":
    main()
