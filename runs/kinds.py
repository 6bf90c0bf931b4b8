"""The registry of loop kinds: what a kind plugs into the kernel.

The kernel (`runs/`) knows no kind by name. Each kind is an app under `loops/` whose
`AppConfig.ready()` registers an instance of its `LoopKind` subclass; the kernel and the
catalogue ask this registry where they once branched on a recipe's kind
(tests/kernel/test_kernel_imports.py fails when `runs/` or the catalogue imports a kind).

`LoopKind` works like Django's `ModelAdmin`: its attributes and methods are the kernel's
behaviour, and a kind overrides what it needs. Every recipe kind in use has a registered
kind (a system check, `runs.checks`), so a caller always gets one: `get` and `of_run` raise
`UnknownKind` rather than answer None.

Apps that are not kinds (notifications) add sweep passes and metrics with `add_sweep_pass`
and `add_metrics`, and listen to `runs.signals`; every app's Celery tasks are sent by their
registered names (runs.dispatch.task).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

# A sweep pass: (now, stale, counts) -> None; `stale` is now - LOOP_STALE_PENDING_SECONDS.
SweepPass = Callable[[Any, Any, Any], None]


class UnknownKind(LookupError):
    """A recipe kind no installed app registers (its app left INSTALLED_APPS)."""


@dataclass(frozen=True)
class RunPart:
    """A panel a kind adds to its runs' page. The page includes `template` (its root element
    has the part's name as its id) and redraws it from `run_part` when the live stream
    sends one of `refresh_on`; `context(run)` fills it, on the page and on each redraw."""

    template: str
    context: Callable | None = None
    refresh_on: str = "run-changed"  # the live stream's event names, space-separated


@dataclass(frozen=True)
class KernelNode:
    """A node as the kernel reads it from a kind's spec (the scheduler, the gate panel,
    resume, the pages and the graph): every kind whose spec is not a workflow's hands the
    kernel these, from `spec.nodes` and `spec.node(id)`, with `spec.layers()`."""

    id: str
    kind: str
    details: tuple[str, ...] = ()  # lines the recipe's graph shows under the node
    depends_on: tuple = ()
    trigger_rule: str = "all_success"
    when: str | None = None
    output_format: dict | None = None
    always_run: bool = False
    provider: str | None = None
    model: str | None = None
    loop: object = None
    loop_group: object = None
    approval: object = None


class LoopKind:
    """What one loop kind provides; a subclass overrides what differs from the kernel's
    behaviour. `name` is the recipe kind it serves (`Recipe.kind`)."""

    name: ClassVar[str] = ""
    label: ClassVar[str] = ""
    # The catalogue asks kinds in ascending `read_order` whose a source is; a kind that
    # reads any YAML mapping (the workflow) is asked last.
    read_order: ClassVar[int] = 0
    # Its format is YAML: what YAML could not read is reported with the kind's own problems.
    reads_yaml: ClassVar[bool] = True
    # Node kind -> start a node of it: (run, node_run) -> None (executor.handover.start_node).
    nodes: ClassVar[Mapping[str, Callable]] = {}
    # Node kind -> run one pending iteration of such a node: (iteration) -> None.
    iterations: ClassVar[Mapping[str, Callable]] = {}
    # A run's own word for where it is (Run.phase, shown instead of its status on pages,
    # API and inbox) -> what it means (Run.status_meaning).
    phases: ClassVar[Mapping[str, str]] = {}
    sweep_passes: ClassVar[Sequence[SweepPass]] = ()
    # The run page: part name -> RunPart, shown in this order.
    run_parts: ClassVar[Mapping[str, RunPart]] = {}
    # Console URL patterns, included at the site's root; an API router under `api_prefix`.
    urls: ClassVar[Sequence[Any]] = ()
    api_router: ClassVar[Any] = None
    api_prefix: ClassVar[str] = ""
    # `manage.py loop` subcommands: name -> module with HELP, `add_arguments(parser)` and
    # `handle(command, options)` (as runs/loop_commands' own).
    loop_commands: ClassVar[Mapping[str, Any]] = {}
    # A run of this kind makes its own isolation (no worktree made by the kernel).
    own_worktrees: ClassVar[bool] = False
    # A rerun works in the same folder as the run it repeats.
    rerun_keeps_workdir: ClassVar[bool] = False
    # Why a failed or cancelled run of this kind cannot be resumed ("" when it can).
    resume_refused: ClassVar[str] = ""
    # The inbox: which of this kind's node rows show as loops of a running run (a Q on
    # NodeRun, within the kind's runs); runs a person must act on besides the stopped ones
    # (a Q on Run). None: no such rows.
    loop_rows: ClassVar[Any] = None
    needs_a_person: ClassVar[Any] = None
    # Row kinds this kind runs outside its recipe's graph (a Python loop's agents, a driven
    # loop's pipeline steps): their failure is not the run's (Run.update_status).
    rows_outside_graph: ClassVar[Sequence[str]] = ()
    # A gate may be decided now and its node resumed later (`decide(record_only=True)`).
    decides_later: ClassVar[bool] = False
    # Why a recipe's source cannot be edited in the console ("" when it can).
    source_read_only: ClassVar[str] = ""
    # The start form asks for a message even when the recipe does not use one.
    asks_message: ClassVar[bool] = False

    # --- the catalogue -------------------------------------------------------------------

    def reads(self, source) -> Any:
        """A recipes.formats.source.RecipeSource -> recipes' LoadResult, or None when the
        source is not of this kind."""
        return None

    def shell_parts(self, spec) -> dict[str, str] | None:
        """The parts of a valid spec that run as code on a worker: where -> text. None (the
        default) says the kind declares none, and the whole source counts as shell
        (recipes.shell_parts: an editor without the shell permission cannot change it)."""
        return None

    def user_recipe_folders(self) -> list:
        """Folders of the user's where the kind's own design keeps recipes (Paths)."""
        return []

    def repository_recipe_folders(self, roots: list) -> list:
        """Folders inside those repositories where the kind's design keeps recipes, of the
        highest precedence (recipes.sync.discover)."""
        return []

    def slug_in(self, source) -> str | None:
        """The slug a recipe file of this kind names itself by, read without validating it
        (a sync names the row by it), or None when the source is not of this kind or names
        no slug."""
        return None

    def declared_slug(self, spec) -> str | None:
        """The slug a recipe names itself by (a step machine's `id:`), or None: the console
        chooses it from the name."""
        return None

    # --- starting a run ------------------------------------------------------------------

    def start_options(self, chosen: str = "") -> dict:
        """More for the start form (StartRunForm's options; a step machine's repositories
        and the chosen one's branches). Empty: the form asks for no repository."""
        return {}

    def check_repository(self, path: str) -> None:
        """A repository a person chose for a new run; raises a services InputError."""
        from runs.errors import InputError

        raise InputError({"repository": f"{self.name} runs take no repository"})

    def check_start(self, spec, inputs, workdir, writes_shell, *, message, child) -> str:
        """Before a run is created: the workdir to use; raises a services error to refuse.
        `writes_shell`: whether who starts it writes shell in the recipe's project."""
        return workdir

    def created(self, run, start: bool) -> bool:
        """Inside the creating transaction: whether the kernel sends advance_run (`start` is
        start_run's: False only creates)."""
        return True

    def declared_trigger(self, spec) -> dict:
        """What the recipe says starts it, for the apps that start runs on their own
        (triggers: webhooks and schedules): `kind`, `events`, `filters` (JSON pointer ->
        allowed values), `inputs` (input name -> JSON pointer), `cron`, `every` (seconds),
        `timezone`; and `command_inputs`, the inputs the recipe runs as a whole command,
        which a value from outside must never fill (`message_is_command`: the message
        stands for one of them). Empty: the format declares no trigger."""
        return {}

    # --- a run going on ------------------------------------------------------------------

    def gate_decided(self, run, gate, node_run, status: str, actor) -> None:
        """A gate of this kind's run decided: the kernel's meaning (accept completes the
        node, feedback iterates, reject fails it)."""
        from runs.decisions import apply_kernel_decision

        apply_kernel_decision(run, gate, node_run, status, actor)

    def check_decision(self, run, gate, status: str) -> None:
        """Before a decision is recorded: raise a services error to refuse it."""

    def review_parts(self, run, gate) -> dict[str, str]:
        """What this kind's gate shows beside the answer and the artifacts (runs.review),
        as words naming each part and its hash; none by default."""
        return {}

    def begin_iteration(self, run, node_run, number: int, *, feedback="", after_gate=False):
        """Start iteration `number` of a looping node (after a gate's feedback, or when a
        budget stop is lifted): the new Iteration, or None when the node ended meanwhile."""
        return node_run.start_iteration(run, number, feedback=feedback, after_gate=after_gate)

    def advance_within(self, run, spec) -> None:
        """Under the run's lock, each time the scheduler advances the run and before it
        walks the run's graph: move on what runs inside its nodes (a workflow's loop_group
        bodies and child runs). The default has nothing inside."""

    def derived_status(self, run, *, finished: bool):
        """(status, error) or (status, error, phase) when the kind says its runs' status
        (a phase one of `phases`), else None: the kernel derives it from the run's nodes
        (Run.update_status)."""
        return None

    def continuations(self) -> Mapping[str, Any]:
        """Row kind -> runs.fork.Continuation: which of this kind's rows offer a fork."""
        return {}

    def run_context(self, run) -> dict:
        """More context for every render of the run's pages (the page, its parts, the fork
        form)."""
        return {}

    def event_sentence(self, event) -> str | None:
        """One sentence for an event of this kind, or None (the kernel's words)."""
        return None

    def person_action(self, run) -> tuple[str, str] | None:
        """What the inbox offers on a run that `needs_a_person`: (label, url)."""
        return None

    # --- the demo provider ---------------------------------------------------------------

    def plays(self, request) -> bool:
        """Whether the demo provider plays this request as the kind's own agent."""
        return False

    def demo_turn(self, provider, request, on_chunk):
        raise NotImplementedError(f"the demo provider does not play {self.name}'s agents")


_kinds: dict[str, LoopKind] = {}
_node_kinds: dict[str, LoopKind] = {}
_sweep_passes: list[SweepPass] = []
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
    return kind


def unregister(name: str) -> None:
    kind = _kinds.pop(name, None)
    if kind is None:
        return
    for node_kind in [k for k, v in _node_kinds.items() if v is kind]:
        del _node_kinds[node_kind]


def is_registered(name: str) -> bool:
    return name in _kinds


def get(name: str) -> LoopKind:
    """The kind registered for a recipe kind; UnknownKind when no app registers it."""
    try:
        return _kinds[name]
    except KeyError:
        raise UnknownKind(f"no installed app registers the loop kind '{name}'") from None


def of_run(run) -> LoopKind:
    return get(run.recipe.kind)


def for_node(node_kind: str) -> LoopKind:
    """The kind that runs nodes (or iterations) of `node_kind` (runs.executor.handover);
    UnknownKind when no kind does."""
    try:
        return _node_kinds[node_kind]
    except KeyError:
        raise UnknownKind(f"no installed kind runs nodes of kind '{node_kind}'") from None


def all_kinds() -> list[LoopKind]:
    return list(_kinds.values())


def readers() -> list[LoopKind]:
    """The kinds in the order the catalogue asks them whose a source is."""
    return sorted(_kinds.values(), key=lambda kind: kind.read_order)


def each(attribute: str) -> list[tuple[LoopKind, Any]]:
    """(kind, value) for every registered kind whose `attribute` is set."""
    return [(kind, value) for kind in _kinds.values() if (value := getattr(kind, attribute))]


def add_sweep_pass(sweep_pass: SweepPass) -> None:
    if sweep_pass not in _sweep_passes:
        _sweep_passes.append(sweep_pass)


def sweep_passes() -> list[SweepPass]:
    return [*_sweep_passes, *(p for k in _kinds.values() for p in k.sweep_passes)]


def add_metrics(collect: Callable) -> None:
    if collect not in _metrics:
        _metrics.append(collect)


def metrics() -> list[Callable]:
    return list(_metrics)
