"""The spec of a ``kind: workflow`` recipe: a DAG of nodes, some of which iterate.

These pydantic models are what the engine and the pages read.  They type-check a
document the rules in :mod:`loops.workflow.format_rules` have already cleaned.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, get_args

from pydantic import (
    Field,
    model_validator,
)

from recipes.formats.spec_parts import (
    InputOption,
    InputSpec,
    OnTimeout,
    PositiveInt,
    ProviderSpec,
    Text,
)
from recipes.formats.spec_parts import (
    SpecModel as _Spec,
)
from runs.engine import dag

# The Celery task that checks a loop_group's iteration once its body has ended (tasks.py).
FINISH_GROUP_TASK = "workflow.finish_group_iteration"

__all__ = [
    "ApprovalSpec",
    "DecisionSpec",
    "FanOutSpec",
    "InputOption",
    "InputSpec",
    "LoopGroupSpec",
    "LoopSpec",
    "NodeSpec",
    "ProviderSpec",
    "RetrySpec",
    "WorkflowSpec",
]

NodeKind = Literal[
    "bash", "prompt", "command", "script", "workflow", "loop", "loop_group", "approval", "cancel"
]
NODE_KINDS = get_args(NodeKind)
TriggerRule = Literal["all_success", "one_success", "none_failed_min_one_success", "all_done"]


class RetrySpec(_Spec):
    max_attempts: int = Field(ge=1, le=10)
    delay_ms: int = Field(default=1000, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, int) and not isinstance(data, bool):
            return {"max_attempts": data}
        return data


class DecisionSpec(_Spec):
    id: Text
    label: Text
    text_required: bool = False
    # What it does to its gate: a loop's complete / iterate / fail; an approval's approve.
    then: Literal["complete", "iterate", "fail", "approve"] | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"id": data, "label": data}
        if isinstance(data, dict) and "label" not in data and isinstance(data.get("id"), str):
            return {**data, "label": data["id"]}
        return data


def gate_decisions(decisions: list[DecisionSpec]) -> list[dict]:
    """Declared decisions as a Gate keeps them (runs.models.Gate.offered_decisions)."""
    return [d.model_dump(exclude_none=True) for d in decisions]


class ApprovalSpec(_Spec):
    message: Text
    decisions: list[DecisionSpec] = Field(default_factory=list)
    approvals: PositiveInt = 1
    capture_response: bool = False
    gate_timeout: Text | None = None
    on_timeout: OnTimeout | None = None
    # At the first deadline tell these (groups or users), then wait escalate_after more.
    escalate_to: list[Text] | None = None
    escalate_after: Text | None = None
    # A declared decision the deadline takes instead of on_timeout (runs.engine.deadlines).
    timeout_decision: Text | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"message": data}
        return data


class LoopSpec(_Spec):
    prompt: str
    command: Text | None = None
    until: Text | None = None
    until_bash: Text | None = None
    until_field: Text | None = None
    max_iterations: PositiveInt
    fresh_context: bool = False
    interactive: bool = False
    gate_message: Text | None = None
    signal_completes: bool = False
    gate_timeout: Text | None = None
    on_timeout: OnTimeout | None = None
    # At the first deadline tell these (groups or users), then wait escalate_after more.
    escalate_to: list[Text] | None = None
    escalate_after: Text | None = None
    # A declared decision the deadline takes instead of on_timeout (runs.engine.deadlines).
    timeout_decision: Text | None = None
    # A gate's own decisions ({id, label, text_required, then}) and its quorum.
    decisions: list[DecisionSpec] = Field(default_factory=list)
    approvals: PositiveInt = 1
    # How each iteration is scored and the rules its scores stop it by, as
    # recipes.formats.scoring stores them.
    score: dict[str, Any] | None = None
    stop: dict[str, dict[str, Any]] | None = None


class LoopGroupSpec(_Spec):
    until: Text | None = None
    until_bash: Text | None = None
    max_iterations: PositiveInt
    fresh_context: bool = False
    interactive: bool = False
    gate_message: Text | None = None
    signal_completes: bool = False
    gate_timeout: Text | None = None
    on_timeout: OnTimeout | None = None
    # At the first deadline tell these (groups or users), then wait escalate_after more.
    escalate_to: list[Text] | None = None
    escalate_after: Text | None = None
    # A declared decision the deadline takes instead of on_timeout (runs.engine.deadlines).
    timeout_decision: Text | None = None
    # A gate's own decisions ({id, label, text_required, then}) and its quorum.
    decisions: list[DecisionSpec] = Field(default_factory=list)
    approvals: PositiveInt = 1
    nodes: list[NodeSpec] = Field(min_length=1)

    def layers(self) -> list[list[str]]:
        return _layers(self.nodes)


class FanOutSpec(_Spec):
    """One child run per item of a list: an upstream node's output (a template such as
    `$list.output`, resolved when the node runs) or a list written in the recipe."""

    items: Text | list[Any]
    max_parallel: PositiveInt = 5
    join: Literal["all_done", "all_success"] = "all_done"
    item_input: str | None = None  # `as:`: the item is also the child's $INPUTS.<name>


class NodeSpec(_Spec):
    id: Text
    kind: NodeKind
    depends_on: list[str] = Field(default_factory=list)
    when: str | None = None
    trigger_rule: TriggerRule = "all_success"
    provider: Text | None = None
    model: Text | None = None
    output_format: dict[str, Any] | None = None
    idle_timeout: PositiveInt | None = None
    timeout: PositiveInt | None = None
    retry: RetrySpec | None = None
    always_run: bool = False
    bash: Text | None = None
    # Values the bash step checks when it starts (runs.engine.shell_checks), set at load.
    start_checks: list[dict[str, Any]] = Field(default_factory=list)
    prompt: Text | None = None
    command: Text | None = None
    loop: LoopSpec | None = None
    loop_group: LoopGroupSpec | None = None
    approval: ApprovalSpec | None = None
    cancel: Text | None = None
    # script: inline code, or a named script resolved to `script_path` at load.
    script: Text | None = None
    runtime: Literal["uv", "bun"] | None = None
    deps: list[Text] = Field(default_factory=list)
    script_path: str | None = None
    # `$INPUTS.<name>` of this node: an included block's inputs and the node's own `with:`
    # (values are JSON; strings are templates resolved when the node runs).
    bindings: dict[str, Any] = Field(default_factory=dict)
    # workflow: another recipe started as child runs (one, or one per fan_out item).
    workflow: Text | None = None
    input: str | None = None
    child_inputs: dict[str, Any] = Field(default_factory=dict)
    fan_out: FanOutSpec | None = None
    # The sandbox (recipes.formats.sandbox): None means the recipe's, then the default.
    network: bool | None = None
    limits: dict[str, int] = Field(default_factory=dict)


class WorkflowSpec(_Spec):
    name: Text
    description: str = ""
    interactive: bool = False
    # "others": the person who started a run may not approve its gates (four eyes).
    approvers: Literal["anyone", "others"] = "anyone"
    # Runs no person watches (a schedule's, a webhook's): no gate may wait in one.
    unattended: bool = False
    provider: Text | None = None
    model: Text | None = None
    # The repository's default assistant (`.archon/config.yaml`): the provider of agent
    # nodes that name none when the console has no default provider of its own.
    default_provider: Text | None = None
    providers: dict[str, ProviderSpec] = Field(default_factory=dict)
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    # Already cleaned by recipes.formats.budget (limits as stored on a run).
    budget: dict[str, str | int | list[str]] = Field(default_factory=dict)
    nodes: list[NodeSpec] = Field(min_length=1)
    # The node whose output is this workflow's result (for include and child runs).
    returns: Text | None = None
    # Whether its steps may use the network, and its processes' limits (recipes.formats.sandbox).
    network: bool | None = None
    limits: dict[str, int] = Field(default_factory=dict)

    def node(self, node_id: str) -> NodeSpec:
        """Top-level node by id; ``group.child`` reaches into loop_group bodies."""
        nodes = self.nodes
        found: NodeSpec | None = None
        for part in node_id.split("."):
            found = next((n for n in nodes if n.id == part), None)
            if found is None:
                raise KeyError(node_id)
            nodes = found.loop_group.nodes if found.loop_group is not None else []
        if found is None:
            raise KeyError(node_id)
        return found

    def layers(self) -> list[list[str]]:
        return _layers(self.nodes)

    def result_node(self) -> str:
        """`returns:`, else the first node (in file order) that no other node depends on."""
        return self.returns or first_sink(self.nodes)


def first_sink(nodes) -> str:
    depended = {dep for node in nodes for dep in node.depends_on}
    return next((n.id for n in nodes if n.id not in depended), nodes[-1].id)


LoopGroupSpec.model_rebuild()


def _layers(nodes: Sequence[NodeSpec]) -> list[list[str]]:
    """Topological layers; inside a layer nodes keep their declaration order."""
    return dag.layers({node.id: list(node.depends_on) for node in nodes})
