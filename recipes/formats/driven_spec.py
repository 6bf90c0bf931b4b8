"""The spec of a ``kind: driven`` recipe: agents, and the host that drives a loop of them.

To the run kernel it looks like a one-node workflow: the host's node (kind ``driven``),
which a worker claims and executes (loops.runner); the rows of the agents it runs in its
pipelines (kind ``agent``) are created as it calls them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from recipes.formats.workflow_spec import (
    InputSpec,
    PositiveInt,
    ProviderSpec,
    Text,
    _Spec,
)

# A loop's cap: its whole history stays readable (one page of it per 100 iterations).
MAX_ITERATIONS_CAP = 1000


class HostLoopSpec(_Spec):
    pool: list[Text] = Field(min_length=1)
    max_iterations: PositiveInt = Field(..., le=MAX_ITERATIONS_CAP)
    hooks: dict[str, Text] = Field(default_factory=dict)
    retry: int = Field(0, ge=0, le=10)


class DrivenAgentSpec(_Spec):
    instructions: Text
    provider: Text | None = None
    model: Text | None = None
    output_schema: dict[str, Any] | None = None
    idle_timeout: PositiveInt | None = None
    loop: HostLoopSpec | None = None


@dataclass(frozen=True)
class DrivenNode:
    """A node as the kernel, the pages and the graph read it."""

    id: str
    kind: str
    details: tuple[str, ...] = ()
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


class DrivenSpec(_Spec):
    kind: Literal["driven"]
    name: Text
    description: str = ""
    provider: Text | None = None
    model: Text | None = None
    providers: dict[str, ProviderSpec] = Field(default_factory=dict)
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    agents: dict[str, DrivenAgentSpec] = Field(min_length=1)
    host: Text

    interactive: bool = False  # a driven run has no gates

    @property
    def host_agent(self) -> DrivenAgentSpec:
        return self.agents[self.host]

    @property
    def loop(self) -> HostLoopSpec:
        return self.host_agent.loop

    @property
    def nodes(self) -> list[DrivenNode]:
        return [self.node(self.host)]

    def layers(self) -> list[list[str]]:
        return [[self.host]]

    def node(self, node_id: str) -> DrivenNode:
        agent = self.agents.get(node_id)
        if node_id == self.host:
            loop = self.loop
            details = (
                f"drives a loop over {', '.join(loop.pool)}",
                f"at most {loop.max_iterations} iterations",
            )
            return DrivenNode(
                id=node_id,
                kind="driven",
                details=details,
                provider=agent.provider,
                model=agent.model,
                output_format=agent.output_schema,
            )
        # Pipeline steps' rows are named by the agent they run.
        return DrivenNode(
            id=node_id,
            kind="agent",
            provider=agent.provider if agent else None,
            model=agent.model if agent else None,
            output_format=agent.output_schema if agent else None,
        )
