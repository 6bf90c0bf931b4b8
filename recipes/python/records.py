"""What a Python run writes while an agent works, and reads back when it replays."""

from __future__ import annotations

import time
from decimal import Decimal

from runs import live
from runs.models import Iteration
from runs.providers.base import Cancelled

from .agents import Agent
from .results import AgentResult, Usage

FLUSH_SECONDS = 0.5


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


class IterationStream:
    """Live output for open pages, saved to the row twice a second; a save that finds the
    iteration no longer running (cancelled) stops the agent."""

    def __init__(self, it: Iteration, run_id: int):
        self.it = it
        self.run_id = run_id
        self.parts: list[str] = []
        self.last_flush = time.monotonic()

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def __call__(self, chunk: str) -> None:
        if chunk:
            self.parts.append(chunk)
            live.publish_output(self.run_id, self.it.pk, chunk)
        if time.monotonic() - self.last_flush >= FLUSH_SECONDS:
            self.last_flush = time.monotonic()
            saved = Iteration.objects.filter(
                pk=self.it.pk, status=Iteration.Status.RUNNING, attempts=self.it.attempts
            ).update(raw_output=self.text)
            if not saved:
                raise Cancelled("the iteration was cancelled")

    def publish(self) -> None:
        return None
