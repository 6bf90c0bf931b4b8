"""What a Python run writes while an agent works, and reads back when it replays."""

from __future__ import annotations

from decimal import Decimal

from runs.models import Iteration

from .agents import Agent
from .results import AgentResult, Usage


def recorded_result(agent: Agent, it: Iteration) -> AgentResult:
    return AgentResult(
        agent=agent.name,
        text=it.output,
        output=agent.parse(it.structured) if agent.output_type else it.output,
        structured=it.structured,
        usage=Usage(it.tokens_in or 0, it.tokens_out or 0),
        cost=Decimal(it.cost_usd) if it.cost_usd is not None else None,
        iteration=it.number,
        prompt=it.prompt,
        duration_ms=it.duration_ms or 0,
    )


def jsonable(value):
    if value is None or isinstance(value, str | int | float | bool | list | dict):
        return value
    return str(value)
