"""What an agent call or a workflow returns, and what a gate decides."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any


@dataclass(frozen=True)
class Usage:
    tokens_in: int = 0
    tokens_out: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.tokens_in + other.tokens_in, self.tokens_out + other.tokens_out)

    @property
    def total(self) -> int:
        return self.tokens_in + self.tokens_out


@dataclass
class AgentResult:
    """One agent's answer. `output` is an instance of the agent's `output_type` when it has
    one, else the text; `structured` is the validated JSON payload behind `output`."""

    agent: str
    text: str
    output: Any = None
    structured: Any = None
    usage: Usage = field(default_factory=Usage)
    cost: Decimal | None = None
    iteration: int = 1
    prompt: str = ""
    duration_ms: int = 0
    # What the provider returned, as the console records it on the call's iteration
    # (runs.executor.agent.AgentOutcome: with its conversation and tool use); None once
    # replayed.
    record: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if self.output is None:
            self.output = self.text

    def __str__(self) -> str:
        return self.text


class Status:
    """How a workflow ended (`WorkflowResult.status`)."""

    COMPLETED = "completed"  # a sequential or parallel workflow ran all its stages
    CONDITION_MET = "condition_met"  # a loop's stop_condition said stop
    MAX_ITERATIONS = "max_iterations_reached"  # a loop ran out of iterations
    ACCEPTED = "accepted"  # a person accepted a loop's result at its gate
    STOP_RULE = "stop_rule"  # a loop's stop rule (then="complete") ended it


@dataclass
class WorkflowResult(AgentResult):
    """A workflow's result reads like its last agent's (`output`, `text`), so a workflow can
    stand wherever an agent can; `usage` and `cost` add up every call inside it."""

    status: str = Status.COMPLETED
    iterations: int = 1
    # Why a stop rule ended the loop (status `stop_rule`): the firing's words.
    stop_reason: str = ""
    results: list[AgentResult] = field(default_factory=list)


def combine_usage(results: list[AgentResult]) -> tuple[Usage, Decimal | None]:
    usage = Usage()
    cost = None
    for result in results:
        usage = usage + result.usage
        if result.cost is not None:
            cost = (cost or Decimal(0)) + result.cost
    return usage, cost


@dataclass(frozen=True)
class GateRequest:
    """A loop asks a person whether to go on after `iteration`."""

    path: tuple[str, ...]  # where the loop sits in the workflow tree
    agent_path: tuple[str, ...]  # the loop's last agent, whose result is being judged
    iteration: int
    max_iterations: int
    result: AgentResult
    condition_met: bool = False
    deadline: object = None  # a runs.engine.deadlines.GateDeadline, from GateOptions
    firing: object = None  # a runs.engine.stop_rules.Firing: a stop rule asks, not a gate=


@dataclass(frozen=True)
class GateDecision:
    action: str  # "accept", "iterate" or "reject"
    feedback: str = ""
    by: str = ""

    ACCEPT = "accept"
    ITERATE = "iterate"
    REJECT = "reject"


class WorkflowError(Exception):
    """A workflow cannot go on; the message says why."""


class AgentFailed(WorkflowError):
    pass


class GateRejected(WorkflowError):
    def __init__(self, decision: GateDecision, iteration: int):
        who = f" by {decision.by}" if decision.by else ""
        why = f": {decision.feedback}" if decision.feedback else ""
        super().__init__(f"rejected at the gate after iteration {iteration}{who}{why}")
        self.decision = decision
        self.iteration = iteration


class RunCancelled(WorkflowError):
    pass
