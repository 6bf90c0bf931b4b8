"""The spec of a step-machine recipe (``schema: planeai.loop.recipe.v1``).

These pydantic models type-check a document the rules in
:mod:`loops.stepmachine.format_rules` have already cleaned; the runner
(:mod:`loops.stepmachine`) and the pages read them. To the run kernel the recipe looks like
a one-node workflow: node ``steps`` of kind ``stepmachine``, which a worker claims like any
other node; each role's sessions are rows of kind ``session``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field

from recipes.formats.spec_parts import InputSpec, OnTimeout, PositiveInt, Text
from recipes.formats.spec_parts import SpecModel as _Spec
from runs.kinds import KernelNode

SCHEMA = "planeai.loop.recipe.v1"
HANDOFF_SCHEMA = "planeai.handoff.v1"
TICK_TASK = "stepmachine.tick_machine"  # its Celery task, sent through runs.dispatch
RECIPE_KIND = "planeai"  # Recipe.kind of step-machine recipes (the name it had first)
MACHINE_NODE = "steps"
MACHINE_KIND = "stepmachine"
SESSION_KIND = "session"

TRIGGER_KINDS = ("manual", "schedule", "github_event", "task_event", "pr_feedback", "ci_failure")
# Triggers that are GitHub deliveries to a webhook (triggers.webhooks): they take events,
# filters and inputs read from the delivery's body.
GITHUB_TRIGGERS = ("github_event", "pr_feedback", "ci_failure")
# Triggers the console cannot run: it has no task tracker to send task events.
UNRUNNABLE_TRIGGERS = ("task_event",)
STEP_KINDS = (
    "session.create",
    "session.prompt",
    "handoff.wait",
    "gates.run",
    "human.wait",
    "round.next",
    "loop.status",
    "loop.event",
)
HANDOFF_STATUSES = ("completed", "blocked", "needs_human", "failed")
GATE_RESULTS = ("pass", "fail", "error")
LOOP_STATUSES = (
    "observing",
    "verifying",
    "completed_unreviewed",
    "approved",
    "blocked",
    "needs_human",
    "failed",
    "cancelled",
)
ISOLATIONS = ("worktree", "project", "readonly")
# Modes with a meaning at run time; any other string is a convention for prompts.
READ_ONLY_MODES = ("review", "readonly")


Scalar = str | int | float | bool


class TriggerSpec(_Spec):
    kind: Literal[TRIGGER_KINDS] = "manual"
    # A GitHub trigger's: the events it takes, JSON pointers into the delivery's body to
    # the values allowed there, and the run's inputs read from the body (name -> pointer).
    events: list[Text] = Field(default_factory=list)
    filters: dict[str, Scalar | list[Scalar]] = Field(default_factory=dict)
    inputs: dict[str, Text] = Field(default_factory=dict)
    # A schedule's: five cron fields read in `timezone`, or every N seconds.
    cron: Text | None = None
    every: PositiveInt | None = None
    timezone: Text = "UTC"

    def declared(self) -> dict:
        """The block as `LoopKind.declared_trigger` gives it."""
        return self.model_dump(mode="json")


class KnowledgeSpec(_Spec):
    files: list[Text] = Field(default_factory=list)
    instructions: list[Text] = Field(default_factory=list)


class ToolsSpec(_Spec):
    required: list[Text] = Field(default_factory=list)
    optional: list[Text] = Field(default_factory=list)


class RoleSpec(_Spec):
    provider: Text = "default"
    mode: Text
    isolation: Literal[ISOLATIONS] = "worktree"
    instructions: str | None = None
    session_reuse: bool = True
    # None: agents have the network (recipes.formats.sandbox); False: `network: none`.
    network: bool | None = None

    @property
    def read_only(self) -> bool:
        """No writes: a reviewing mode, or readonly isolation."""
        return self.mode in READ_ONLY_MODES or self.isolation == "readonly"

    @property
    def writes(self) -> bool:
        return not self.read_only


class PolicySpec(_Spec):
    max_rounds: PositiveInt = 3
    max_ticks: PositiveInt = 50
    max_sessions: PositiveInt = 5
    stale_after_ms: PositiveInt | None = None
    merge_policy: Literal["human"] = "human"
    auto_approve: bool = True


class GateCommandSpec(_Spec):
    name: Text
    command: Text


class StepSpec(_Spec):
    id: Text
    kind: Literal[STEP_KINDS]
    role: Text | None = None
    prompt: Text | None = None
    branch: Text | None = None
    from_: Text | None = Field(None, alias="from")
    on: dict[str, Text] = Field(default_factory=dict)
    status: Literal[LOOP_STATUSES] | None = None
    next: Text | None = None
    select: Literal["latest"] | None = None
    event_kind: Text | None = None
    gates: list[GateCommandSpec] = Field(default_factory=list)
    gate_timeout: Text | None = None  # a human.wait's deadline (runs.engine.deadlines)
    on_timeout: OnTimeout | None = None
    escalate_to: list[Text] | None = None
    escalate_after: Text | None = None
    timeout_decision: Text | None = None
    # A human.wait's own decisions ({id, label, text_required, then}) and its quorum.
    decisions: list[dict[str, Any]] = Field(default_factory=list)
    approvals: int = 1

    model_config = ConfigDict(
        strict=True, extra="ignore", protected_namespaces=(), populate_by_name=True
    )


class PlaneSpec(_Spec):
    schema_: Literal["planeai.loop.recipe.v1"] = Field(alias="schema")
    id: Text
    name: Text
    description: str = ""
    trigger: TriggerSpec = Field(default_factory=TriggerSpec)
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    knowledge: KnowledgeSpec = Field(default_factory=KnowledgeSpec)
    tools: ToolsSpec = Field(default_factory=ToolsSpec)
    roles: dict[str, RoleSpec] = Field(default_factory=dict)
    policy: PolicySpec = Field(default_factory=PolicySpec)
    steps: list[StepSpec] = Field(min_length=1)
    # Whether gate commands may use the network, and every process's limits
    # (recipes.formats.sandbox).
    network: bool | None = None
    limits: dict[str, int] = Field(default_factory=dict)

    model_config = ConfigDict(
        strict=True, extra="ignore", protected_namespaces=(), populate_by_name=True
    )

    kind: str = "planeai"
    # Roles name providers configured in the admin (or builtin): there is no inline map.
    INLINE_PROVIDERS: ClassVar[bool] = False
    # The kernel's view: no inline providers, no recipe-wide provider or model.
    providers: dict = Field(default_factory=dict)
    provider: str | None = None
    model: str | None = None

    # --- the kernel's one-node view ---------------------------------------------------

    @property
    def nodes(self) -> list[KernelNode]:
        return [KernelNode(id=MACHINE_NODE, kind=MACHINE_KIND)]

    def layers(self) -> list[list[str]]:
        return [[MACHINE_NODE]]

    def node(self, node_id: str) -> KernelNode:
        if node_id == MACHINE_NODE:
            return KernelNode(id=MACHINE_NODE, kind=MACHINE_KIND)
        if node_id in self.roles:
            return KernelNode(id=node_id, kind=SESSION_KIND)
        raise KeyError(node_id)

    # --- the step machine's view ------------------------------------------------------

    def step(self, step_id: str) -> StepSpec:
        for step in self.steps:
            if step.id == step_id:
                return step
        raise KeyError(step_id)

    def following(self, step_id: str) -> str | None:
        """The step after `step_id` in the list (None past the end)."""
        ids = [s.id for s in self.steps]
        index = ids.index(step_id)
        return ids[index + 1] if index + 1 < len(ids) else None

    def resolved(self) -> dict:
        """The recipe with every default filled in, as `create --dry-run` prints it."""
        return self.model_dump(
            mode="json", by_alias=True, exclude={"kind", "providers", "provider", "model"}
        )
