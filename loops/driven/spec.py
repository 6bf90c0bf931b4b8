"""The spec of a ``kind: driven`` recipe: agents, and the host that drives a loop of them.

To the run kernel it looks like a one-node workflow: the host's node (kind ``driven``),
which a worker claims and executes (loops.driven.runner); the rows of the agents it runs in its
pipelines (kind ``agent``) are created as it calls them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from recipes.formats.spec_parts import (
    InputSpec,
    PositiveInt,
    ProviderSpec,
    Text,
)
from recipes.formats.spec_parts import (
    SpecModel as _Spec,
)
from runs.kinds import KernelNode

# The row of one pipeline step (an agent the host ran through `loop_run`): a kind of its own.
PIPELINE_STEP = "pipeline_step"

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
    def nodes(self) -> list[KernelNode]:
        return [self.node(self.host)]

    def layers(self) -> list[list[str]]:
        return [[self.host]]

    def node(self, node_id: str) -> KernelNode:
        agent = self.agents.get(node_id)
        if node_id == self.host:
            loop = self.loop
            details = (
                f"drives a loop over {', '.join(loop.pool)}",
                f"at most {loop.max_iterations} iterations",
            )
            return KernelNode(
                id=node_id,
                kind="driven",
                details=details,
                provider=agent.provider,
                model=agent.model,
                output_format=agent.output_schema,
            )
        # Pipeline steps' rows are named by the agent they run.
        return KernelNode(
            id=node_id,
            kind=PIPELINE_STEP,
            provider=agent.provider if agent else None,
            model=agent.model if agent else None,
            output_format=agent.output_schema if agent else None,
        )
