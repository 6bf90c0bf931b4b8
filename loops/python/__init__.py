"""Loops written in Python (Python recipes): agents, a loop with a stop condition, and sequential
and parallel workflows that all share `await x.run(input)`.

    from loops.python import Agent, LoopWorkflow, score_at_least
"""

from .agents import Agent
from .conditions import StopCondition, contains_keyword, min_iterations_and_length, score_at_least
from .hosts import DirectHost
from .results import (
    AgentFailed,
    AgentResult,
    GateDecision,
    GateRejected,
    GateRequest,
    RunCancelled,
    Status,
    Usage,
    WorkflowError,
    WorkflowResult,
)
from .workflows import GateOptions, LoopWorkflow, ParallelWorkflow, SequentialWorkflow

__all__ = [
    "Agent",
    "AgentFailed",
    "AgentResult",
    "DirectHost",
    "GateDecision",
    "GateOptions",
    "GateRejected",
    "GateRequest",
    "LoopWorkflow",
    "ParallelWorkflow",
    "RunCancelled",
    "SequentialWorkflow",
    "Status",
    "StopCondition",
    "Usage",
    "WorkflowError",
    "WorkflowResult",
    "contains_keyword",
    "min_iterations_and_length",
    "score_at_least",
]
