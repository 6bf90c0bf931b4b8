"""Scored writer and reviewer (Python)

A writer drafts, a reviewer scores the draft from 0 to 100 with feedback, and the loop
stops once the score reaches 80 (at most five iterations). On the demo agent the score
rises each iteration (55, 70, 85), so the loop ends on iteration 3.

Start it from the console, or run this file as a script to record the same run (from
the project's folder, with the console's Python):

    .venv/bin/python -m recipes.builtin.scored_writer_reviewer "Write marketing copy"
"""

import asyncio
import os
import sys

from pydantic import BaseModel

from loops.python import Agent, AgentResult, LoopWorkflow


class Review(BaseModel):
    content: str
    score: int  # 0-100
    feedback: str


writer = Agent(
    name="writer",
    instructions="Write content or improve it based on feedback.",
    provider="demo",
)
reviewer = Agent(
    name="reviewer",
    instructions="Evaluate the writing and provide a score (0-100) with feedback.",
    provider="demo",
    output_type=Review,
)


def quality_reached(result: AgentResult, iteration: int) -> bool:
    """Stop once the reviewer scores 80 or more."""
    if isinstance(result.output, Review):
        return result.output.score >= 80
    return False


workflow = LoopWorkflow(
    agents=[writer, reviewer],
    stop_condition=quality_reached,
    max_iterations=5,
)


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    result = asyncio.run(workflow.run(" ".join(sys.argv[1:]) or "Write marketing copy"))
    print(f"{result.status} after {result.iterations} iterations: score {result.output.score}")
