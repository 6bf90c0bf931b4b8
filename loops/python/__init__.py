"""Loops written in Python (Python recipes): agents, a loop with a stop condition, and sequential
and parallel workflows that all share `await x.run(input)`.

    from loops.python import Agent, LoopWorkflow, score_at_least
    from loops.python import StopRules, Target, Plateau, CostPerPoint  # a loop's stop rules
"""

from runs.engine.stop_rules import CostPerPoint, Firing, Plateau, StopRules, Target

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
    "CostPerPoint",
    "DirectHost",
    "Firing",
    "GateDecision",
    "GateOptions",
    "GateRejected",
    "GateRequest",
    "LoopWorkflow",
    "ParallelWorkflow",
    "Plateau",
    "RunCancelled",
    "SequentialWorkflow",
    "Status",
    "StopCondition",
    "StopRules",
    "Target",
    "Usage",
    "WorkflowError",
    "WorkflowResult",
    "contains_keyword",
    "min_iterations_and_length",
    "score_at_least",
]
