"""Status columns of runs, nodes, iterations and gates are written only by the model
transitions (runs/models): a turn whose run ended is cancelled through one of them, and
no module elsewhere updates a kernel status column with a queryset of its own, saves one
it set on an instance, or calls the writers under the transitions (`_move`, `set_status`)."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from loops.stepmachine import turns
from runs.models import Iteration, NodeRun, Run

ROOT = Path(__file__).resolve().parents[2]
KERNEL_MODELS = {"Run", "NodeRun", "Iteration", "Gate"}
# Where status writes belong (the transitions), and what is not the application.
ALLOWED = ("runs/models/", "tests/", "bench/")
# Not the application wherever they are: build output, installed packages, migrations
# (and hidden folders such as .venv).
SKIPPED = {"build", "dist", "node_modules", "migrations", "__pycache__"}


@pytest.fixture
def ended_turn(bundled, broker):
    recipe = bundled["guided-refine"]
    run = Run.objects.create(
        recipe=recipe, recipe_version=recipe.current_version, status=Run.Status.CANCELLED
    )
    row = NodeRun.objects.create(run=run, node_id="writer", kind="session", status="running")
    return Iteration.objects.create(run=run, node_run=row, node_id="writer", number=1)


def test_a_turn_whose_run_ended_is_cancelled_without_running(ended_turn):
    turns.run_turn(ended_turn)
    ended_turn.refresh_from_db()
    assert ended_turn.status == Iteration.Status.CANCELLED
    assert ended_turn.error == "the run ended (cancelled) first"
    assert ended_turn.finished_at is not None
    assert ended_turn.attempts == 0  # never claimed


def test_cancel_if_pending_leaves_a_claimed_iteration_alone(ended_turn):
    Iteration.objects.filter(pk=ended_turn.pk).update(status=Iteration.Status.RUNNING)
    assert not ended_turn.cancel_if_pending("too late")
    ended_turn.refresh_from_db()
    assert ended_turn.status == Iteration.Status.RUNNING and ended_turn.error == ""


def _root_name(node: ast.AST) -> str | None:
    """`Iteration` for `Iteration.objects.filter(...).update`, following the chain."""
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute | ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Name):
            return node.id
        else:
            return None


def python_files(root: Path) -> list[Path]:
    """The application's modules: not the models, tests, migrations, build output
    (build/, dist/), installed packages (.venv, node_modules) or hidden folders."""
    found = []
    for folder, subfolders, files in os.walk(root):
        relative = Path(folder).relative_to(root).as_posix()
        prefix = "" if relative == "." else relative + "/"
        subfolders[:] = [
            name
            for name in subfolders
            if not name.startswith(".")
            and name not in SKIPPED
            and not (prefix + name + "/").startswith(ALLOWED)
        ]
        found += [Path(folder) / name for name in files if name.endswith(".py")]
    return sorted(found)


# The writers the transitions are made of: only runs/models calls them.
PRIVATE_WRITERS = {"_move", "set_status"}


def _related_names() -> set[str]:
    """The managers that reach kernel rows from another row (`run.nodes`, `row.iterations`)."""
    from django.apps import apps

    names = set()
    for model in apps.get_app_config("runs").get_models():
        if model.__name__ in KERNEL_MODELS:
            names |= {rel.get_accessor_name() for rel in model._meta.related_objects}
    return names - {None}


def _chain(node: ast.AST) -> list[str]:
    """The attribute names along `a.b(...).c.d`, from the call's receiver to its root."""
    names = []
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        else:
            return names


def _names_status(keyword: ast.keyword) -> bool:
    """`update_fields=[..., "status", ...]` (a literal list, tuple or set)."""
    value = keyword.value
    return isinstance(value, ast.List | ast.Tuple | ast.Set) and any(
        isinstance(item, ast.Constant) and item.value == "status" for item in value.elts
    )


def _status_set_on(function: ast.AST) -> set[str]:
    """The names whose `.status` the function assigns (`row.status = ...`)."""
    targets = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if (
                    isinstance(target, ast.Attribute)
                    and target.attr == "status"
                    and isinstance(target.value, ast.Name)
                ):
                    targets.add(target.value.id)
    return targets


def _calls(tree: ast.AST):
    """Each method call, with the names whose `.status` its function assigns (the innermost
    function around it: an inner function's own assignments win). One pass over the tree,
    each function's assignments found once: asking them again for every node of a function
    made this scan quadratic."""

    def visit(node: ast.AST, assigned: set[str]):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assigned = _status_set_on(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            yield node, assigned
        for child in ast.iter_child_nodes(node):
            yield from visit(child, assigned)

    yield from visit(tree, set())


def _a_span_status(call: ast.Call) -> bool:
    """`span.set_status(Status(...))`: OpenTelemetry's span, not a kernel row (runs/telemetry.py
    marks a failed step's span so)."""
    first = call.args[0] if call.args else None
    return isinstance(first, ast.Call) and _root_name(first.func) == "Status"


def _writes(tree: ast.AST, related: set[str]) -> list[int]:
    lines = []
    for node, assigned in _calls(tree):
        method, receiver = node.func.attr, node.func.value
        keywords = {k.arg: k for k in node.keywords}
        if method in PRIVATE_WRITERS and not _a_span_status(node):
            lines.append(node.lineno)
        elif method == "update" and "status" in keywords:
            # `status=Loop.Status.X` names a model of another app (its own `iterations`).
            named = _root_name(keywords["status"].value)
            other = isinstance(keywords["status"].value, ast.Attribute) and (
                named not in KERNEL_MODELS
            )
            kernel = _root_name(receiver) in KERNEL_MODELS or related & set(_chain(receiver))
            if kernel and not other:
                lines.append(node.lineno)
        elif method == "save":
            fields = keywords.get("update_fields")
            if fields is not None and _names_status(fields):
                lines.append(node.lineno)
            elif (
                fields is None
                and not node.args  # a Model's save takes none (`state.save(row)` is not one)
                and isinstance(receiver, ast.Name)
                and receiver.id in assigned
            ):
                lines.append(node.lineno)
    return lines


def status_writes_outside_the_models(root: Path = ROOT) -> list[str]:
    """Every call outside runs/models that writes a kernel status column itself."""
    related = _related_names()
    found = set()
    for path in python_files(root):
        relative = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(), filename=relative)
        found |= {f"{relative}:{line}" for line in _writes(tree, related)}
    return sorted(found, key=lambda place: (place.split(":")[0], int(place.split(":")[1])))


def test_no_module_outside_the_models_updates_a_kernel_status_column():
    assert status_writes_outside_the_models() == [], (
        "write these through a transition of runs/models (Iteration/NodeRun/Gate/Run)"
    )


def test_the_check_finds_a_direct_write(tmp_path):
    """The scan above must be able to fail: a module written the old way is caught."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "turns.py").write_text(
        "Iteration.objects.filter(pk=1, status='pending').update(\n"
        "    status=Iteration.Status.CANCELLED, error='x'\n)\n"
    )
    assert status_writes_outside_the_models(tmp_path) == ["app/turns.py:1"]


def test_the_check_finds_every_other_way_to_write_a_status(tmp_path):
    """A transition's private writer called from outside, a related manager's update, and
    a status saved from an instance are caught too; reads and other columns are not."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "engine.py").write_text(
        "def go(run, row):\n"  # 1
        "    row._move('running', allowed=['paused'])\n"  # 2
        "    run.set_status('failed', error='x')\n"  # 3
        "    run.nodes.filter(status='running').update(status='cancelled')\n"  # 4
        "    row.save(update_fields=['state', 'status'])\n"  # 5
        "    row.status = 'completed'\n"  # 6
        "    row.save()\n"  # 7
        "    run.save(update_fields=['budget'])\n"  # 8: another column
        "    run.nodes.filter(status='running').update(error='')\n"  # 9: a read of status
        "    loop.save()\n"  # 10: nothing set its status here
        "    loop.iterations.update(status=LoopIteration.Status.FAILED)\n"  # 11: another app's
        "    row.iterations.update(status=Iteration.Status.FAILED)\n"  # 12
    )
    assert status_writes_outside_the_models(tmp_path) == [
        f"app/engine.py:{line}" for line in (2, 3, 4, 5, 7, 12)
    ]


def test_the_check_reads_no_build_output_or_installed_packages(tmp_path):
    """A built copy of the project (build/, dist/) or an installed one (.venv,
    node_modules) is not the application: its writes are not reported."""
    write = "Iteration.objects.filter(pk=1).update(status='cancelled')\n"
    for folder in ("build/lib/runs", "dist/x", ".venv/lib", "web/node_modules/pkg"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "engine.py").write_text(write)
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "engine.py").write_text(write)
    assert status_writes_outside_the_models(tmp_path) == ["app/engine.py:1"]
