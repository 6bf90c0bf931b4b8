"""The running context of a workflow and the prompt an agent builds from it.

The context rule: only the first agent of a loop's first iteration (or a lone agent, or the
first stage of a pipeline) receives the user's input. Every later agent sees the result of
the agent before it and, from a loop's second iteration on, the previous iteration's result
(what its stop condition judged); feedback a person gave at a gate reaches every agent of
the iteration that follows.
"""

from __future__ import annotations

from dataclasses import dataclass

from .results import AgentResult


@dataclass(frozen=True)
class Context:
    input: str | None = None
    previous: AgentResult | None = None
    previous_iteration: AgentResult | None = None
    feedback: str = ""


@dataclass(frozen=True)
class Scope:
    """Where a call sits: its path in the workflow tree and the enclosing loop's iteration."""

    host: object
    path: tuple[str, ...] = ()
    iteration: int = 1
    max_iterations: int | None = None  # of the enclosing loop

    def child(self, name: str, iteration: int | None = None, max_iterations=None) -> Scope:
        if iteration is None:
            iteration, max_iterations = self.iteration, self.max_iterations
        return Scope(self.host, (*self.path, name), iteration, max_iterations)


def render_prompt(instructions: str, context: Context, iteration: int) -> str:
    parts = [instructions.strip()]
    if context.input is not None:
        parts.append("## Input\n\n" + context.input)
    if context.previous is not None:
        parts.append(
            f"## Previous result (from {context.previous.agent}, iteration "
            f"{context.previous.iteration})\n\n{context.previous.text}"
        )
    if context.previous_iteration is not None:
        parts.append(
            f"## Result of the previous iteration (from {context.previous_iteration.agent}, "
            f"iteration {context.previous_iteration.iteration})\n\n"
            f"{context.previous_iteration.text}"
        )
    if context.feedback:
        parts.append("## Feedback from a person\n\n" + context.feedback)
    if iteration > 1:
        parts.append(f"(This is iteration {iteration}.)")
    return "\n\n".join(part for part in parts if part)


def unique_names(names: list[str]) -> list[str]:
    """Sibling stages need distinct names (they become node ids): `x`, `x-2`, `x-3`."""
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if seen[name] == 1 else f"{name}-{seen[name]}")
    return unique
