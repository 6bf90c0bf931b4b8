"""Status columns of runs, nodes, iterations and gates are written only by the model
transitions (runs/models): a turn whose run ended is cancelled through one of them, and
no module elsewhere updates a kernel status column with a queryset of its own."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from recipes.planeai import turns
from runs.models import Iteration, NodeRun, Run

ROOT = Path(__file__).resolve().parents[2]
KERNEL_MODELS = {"Run", "NodeRun", "Iteration", "Gate"}
# Where status writes belong (the transitions), and what is not the application.
ALLOWED = ("runs/models/", "tests/", "bench/", "node_modules/")


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
    """The application's modules: not the models, tests, migrations or hidden folders."""
    found = []
    for folder, subfolders, files in os.walk(root):
        relative = Path(folder).relative_to(root).as_posix()
        prefix = "" if relative == "." else relative + "/"
        subfolders[:] = [
            name
            for name in subfolders
            if not name.startswith(".")
            and name != "migrations"
            and not (prefix + name + "/").startswith(ALLOWED)
        ]
        found += [Path(folder) / name for name in files if name.endswith(".py")]
    return sorted(found)


def status_writes_outside_the_models(root: Path = ROOT) -> list[str]:
    found = []
    for path in python_files(root):
        relative = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), filename=relative)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "update"
                and any(keyword.arg == "status" for keyword in node.keywords)
                and _root_name(node.func.value) in KERNEL_MODELS
            ):
                found.append(f"{relative}:{node.lineno}")
    return found


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
