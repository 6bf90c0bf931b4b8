"""The registry of loop kinds: what a kind plugs into the kernel.

The kernel (`runs/`) knows no kind by name. Each kind is an app whose `AppConfig.ready()`
calls `register(LoopKind(...))` with what it provides; the kernel asks this registry where
it once branched on a recipe's kind (tests/kernel/test_kernel_imports.py fails when `runs/`
imports a kind). Apps that are not kinds (notifications) add sweep passes, tasks and
metrics with `add_sweep_pass`, `add_task` and `add_metrics`, and listen to `runs.signals`.

Every hook is optional: a kind that gives none runs on the kernel's defaults (the YAML
workflow's nodes, a gate decided by the kernel's own rules, a status derived from nodes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# A sweep pass: (now, stale, counts) -> None; `stale` is now - LOOP_STALE_PENDING_SECONDS.
SweepPass = Callable[[Any, Any, Any], None]


@dataclass(frozen=True)
class RunPart:
    """A panel a kind adds to its runs' page. The page includes `template` (its root element
    has the part's name as its id) and redraws it from `run_part` when the live stream
    sends one of `refresh_on`; `context(run)` fills it, on the page and on each redraw."""

    template: str
    context: Callable | None = None
    refresh_on: str = "run-changed"  # the live stream's event names, space-separated


@dataclass(frozen=True)
class LoopKind:
    """What one loop kind provides. `name` is the recipe kind it serves (`Recipe.kind`)."""

    name: str
    label: str = ""
    # Read a recipe of this kind: (source, source_path) -> recipes' LoadResult, or None
    # when the source is not of this kind (recipes.validation.validate_source).
    reads: Callable | None = None
    # Node kind -> start a node of it: (run, node_run) -> None (executor.steps.start_node).
    nodes: Mapping[str, Callable] = field(default_factory=dict)
    # Node kind -> run one pending iteration of such a node: (iteration) -> None.
    iterations: Mapping[str, Callable] = field(default_factory=dict)
    # Before a run is created: (spec, inputs, workdir, person, *, message, child) -> the
    # workdir to use; raises a services error to refuse the start.
    check_start: Callable | None = None
    # A repository a person chose for a new run (the API, the start form): (path) -> None,
    # raises a services InputError. A kind without it takes no repository.
    check_repository: Callable | None = None
    # Inside the creating transaction: (run, start) -> whether the kernel sends advance_run
    # (without this hook it always does; `start` is start_run's: False only creates).
    created: Callable | None = None
    # A gate of this kind's run decided: (run, gate, node_run, status, actor) -> None.
    gate_decided: Callable | None = None
    # A run of this kind says its own status: (run, *, finished) -> (status, error).
    derived_status: Callable | None = None
    # Row kind -> runs.fork.Continuation; a callable, read once the apps are loaded.
    continuations: Callable[[], Mapping[str, Any]] | None = None
    sweep_passes: Sequence[SweepPass] = ()
    # The run page: part name -> RunPart, shown in this order. More context for every render
    # of the run's pages (the page, its parts, the fork form): (run) -> dict of its words.
    run_parts: Mapping[str, RunPart] = field(default_factory=dict)
    run_context: Callable | None = None
    # Console URL patterns, included at the site's root; an API router under `api_prefix`.
    urls: Sequence[Any] = ()
    api_router: Any = None
    api_prefix: str = ""
    # `manage.py loop` subcommands: name -> module with HELP, `add_arguments(parser)` and
    # `handle(command, options)` (as runs/loop_commands' own).
    loop_commands: Mapping[str, Any] = field(default_factory=dict)
    # Celery tasks sent by name through runs.dispatch: name -> task.
    tasks: Mapping[str, Any] = field(default_factory=dict)
    # One sentence for an event of this kind, or None: (event) -> str | None.
    event_sentence: Callable | None = None
    # The demo provider plays this kind's agent when `plays(request)`: (provider, request,
    # on_chunk) -> AgentResult.
    demo: tuple[Callable, Callable] | None = None
    # A run of this kind makes its own isolation (no worktree made by the kernel).
    own_worktrees: bool = False
    # A rerun works in the same folder as the run it repeats.
    rerun_keeps_workdir: bool = False
    # Why a failed or cancelled run of this kind cannot be resumed ("" when it can).
    resume_refused: str = ""
    # The inbox: which of this kind's node rows show as loops of a running run (a Q on
    # NodeRun, within the kind's runs); runs a person must act on besides the stopped ones
    # (a Q on Run), and what to offer there: (run) -> (label, url) or None.
    loop_rows: Any = None
    needs_a_person: Any = None
    person_action: Callable | None = None


_kinds: dict[str, LoopKind] = {}
_node_kinds: dict[str, LoopKind] = {}
_sweep_passes: list[SweepPass] = []
_tasks: dict[str, Any] = {}
_metrics: list[Callable] = []


def register(kind: LoopKind) -> LoopKind:
    """Called from the kind's AppConfig.ready(); registering the same name again replaces
    it (tests register and unregister kinds of their own)."""
    unregister(kind.name)
    for node_kind in [*kind.nodes, *kind.iterations]:
        owner = _node_kinds.get(node_kind)
        if owner is not None and owner.name != kind.name:
            raise ValueError(f"node kind '{node_kind}' is already {owner.name}'s")
    _kinds[kind.name] = kind
    for node_kind in [*kind.nodes, *kind.iterations]:
        _node_kinds[node_kind] = kind
    _tasks.update(kind.tasks)
    return kind


def unregister(name: str) -> None:
    kind = _kinds.pop(name, None)
    if kind is None:
        return
    for node_kind in [k for k, v in _node_kinds.items() if v is kind]:
        del _node_kinds[node_kind]
    for task_name in kind.tasks:
        _tasks.pop(task_name, None)


def get(name: str) -> LoopKind | None:
    """The kind registered for a recipe kind, or None (a workflow: the kernel's defaults)."""
    return _kinds.get(name)


def of_run(run) -> LoopKind | None:
    return _kinds.get(run.recipe.kind)


def for_node(node_kind: str) -> LoopKind | None:
    return _node_kinds.get(node_kind)


def all_kinds() -> list[LoopKind]:
    return list(_kinds.values())


def each(hook: str) -> list[tuple[LoopKind, Any]]:
    """(kind, value) for every registered kind that gives `hook`."""
    return [(kind, value) for kind in _kinds.values() if (value := getattr(kind, hook))]


def add_sweep_pass(sweep_pass: SweepPass) -> None:
    if sweep_pass not in _sweep_passes:
        _sweep_passes.append(sweep_pass)


def sweep_passes() -> list[SweepPass]:
    return [*_sweep_passes, *(p for k in _kinds.values() for p in k.sweep_passes)]


def add_task(name: str, task) -> None:
    _tasks[name] = task


def task(name: str):
    return _tasks.get(name)


def add_metrics(collect: Callable) -> None:
    if collect not in _metrics:
        _metrics.append(collect)


def metrics() -> list[Callable]:
    return list(_metrics)
