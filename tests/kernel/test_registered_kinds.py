"""The four loop kinds plug into the kernel through runs.kinds, registered from their
AppConfig.ready(); the kernel's execution side asks the registry and imports none of them."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from runs import dispatch, kinds, services
from runs.executor.sweep import sweep

ROOT = Path(__file__).resolve().parents[2]
KIND_PACKAGES = ("loops",)
# Where the kernel once named a kind, and now asks the registry.
ASKS_THE_REGISTRY = [
    "runs/executor/handover.py",
    "runs/executor/scheduler.py",
    "runs/executor/sweep.py",
    "runs/budget.py",
    "runs/services.py",
    "runs/decisions.py",
    "runs/models/run.py",
    "runs/fork.py",
    "runs/tasks.py",
    "runs/dispatch.py",
    "runs/providers/demo.py",
    "runs/worktree.py",
]


def imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


@pytest.mark.parametrize("path", ASKS_THE_REGISTRY)
def test_the_kernel_s_execution_side_imports_no_kind(path):
    kinds_imported = [
        module
        for module in imported_modules(ROOT / path)
        if any(module == p or module.startswith(p + ".") for p in KIND_PACKAGES)
    ]
    assert not kinds_imported, f"{path} imports {kinds_imported}: ask runs.kinds instead"


def overrides(kind, hook: str) -> bool:
    """Whether the kind's class gives `hook` its own (not the kernel's default)."""
    return getattr(type(kind), hook) is not getattr(kinds.LoopKind, hook)


def test_the_step_machine_provides_its_hooks():
    kind = kinds.get("planeai")
    assert set(kind.nodes) == {"stepmachine"} and set(kind.iterations) == {"session"}
    assert kinds.for_node("stepmachine") is kind and kinds.for_node("session") is kind
    for hook in ("check_start", "created", "gate_decided", "derived_status", "plays", "reads"):
        assert overrides(kind, hook), hook
    assert set(kind.continuations()) == {"session"}
    assert len(kind.sweep_passes) == 2
    assert kind.own_worktrees and kind.rerun_keeps_workdir and kind.resume_refused
    # Sent under the step machine's own name (tests/kernel/test_task_names.py: the
    # kernel-era name still runs what was queued under it).
    assert dispatch.task("stepmachine.tick_machine").name == "stepmachine.tick_machine"


def test_the_python_kind_provides_its_hooks():
    kind = kinds.get("python")
    assert set(kind.nodes) == {"python"} and kinds.for_node("python") is kind
    assert overrides(kind, "gate_decided") and not overrides(kind, "derived_status")
    assert set(kind.continuations()) == {"agent"}
    assert not kind.own_worktrees and not kind.resume_refused


def test_driven_loops_provide_their_hooks():
    kind = kinds.get("driven")
    assert set(kind.nodes) == {"driven"} and kinds.for_node("driven") is kind
    # The host's turns, and the pipeline steps (rows of a kind of their own).
    assert set(kind.continuations()) == {"driven", "pipeline_step"}


def test_a_workflow_provides_its_hooks():
    kind = kinds.get("workflow")
    assert overrides(kind, "reads") and overrides(kind, "shell_parts")
    assert not overrides(kind, "gate_decided") and not overrides(kind, "derived_status")
    for hook in ("begin_iteration", "advance_within", "check_decision"):
        assert overrides(kind, hook), hook
    for node_kind in ("bash", "prompt", "loop", "loop_group", "approval", "workflow"):
        assert kinds.for_node(node_kind) is kind
    assert set(kind.iterations) == {"loop"}
    assert set(kind.continuations()) == {"loop", "loop_group"}
    assert len(kind.sweep_passes) == 2
    # Sent under the workflow's own name; the kernel-era name still runs what was queued.
    name = "workflow.finish_group_iteration"
    assert dispatch.task(name).name == name
    assert dispatch.task("runs.tasks.finish_group_iteration")
    with pytest.raises(kinds.UnknownKind):
        kinds.for_node("no-such-node-kind")


def test_a_kind_nobody_registers_is_refused_not_defaulted():
    with pytest.raises(kinds.UnknownKind):
        kinds.get("no-such-kind")


def test_the_sweep_runs_the_passes_kinds_register(db):
    seen = []

    class Sweeping(kinds.LoopKind):
        name = "toy-sweeping"
        sweep_passes = (lambda now, stale, counts: seen.append((now, stale, counts)),)

    toy = kinds.register(Sweeping())
    try:
        sweep()
    finally:
        kinds.unregister(toy.name)
    ((now, stale, counts),) = seen
    assert stale < now and hasattr(counts, "update")


def test_a_task_nobody_registered_is_refused():
    with pytest.raises(LookupError):
        dispatch.task("no_such_task")


def test_start_run_names_its_starter_one_way():
    """One actor, required; what only the engine gives (a parent node, a rerun's
    original, a fork) travels in one `Lineage`, never as a surface's keyword."""
    parameters = inspect.signature(services.start_run).parameters
    assert parameters["actor"].default is inspect.Parameter.empty
    assert not {"user", "started_via", "parent_node", "child_index", "forked", "rerun_of"} & set(
        parameters
    )
    assert set(inspect.signature(services.Lineage).parameters) == {
        "parent_node",
        "child_index",
        "rerun_of",
        "forked",
    }
