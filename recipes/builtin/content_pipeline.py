"""Content pipeline (Python)

Research, then two analyses in parallel, then a write-review loop that stops at a review
score of 80, then an editor: a loop as one stage of a larger pipeline. Runs on the demo
agent out of the box. As a script, from the project's folder:

    .venv/bin/python -m recipes.builtin.content_pipeline "A launch post for our new API"
"""

import asyncio
import os
import sys

from pydantic import BaseModel

from loops.python import (
    Agent,
    LoopWorkflow,
    ParallelWorkflow,
    SequentialWorkflow,
    score_at_least,
)


class Review(BaseModel):
    content: str
    score: int  # 0-100
    feedback: str


research = Agent("research", "Collect the facts the piece needs about the topic.", "demo")
analysis = ParallelWorkflow(
    [
        Agent("market", "What does the market say about this? Use the research.", "demo"),
        Agent("audience", "Who reads this and what do they need? Use the research.", "demo"),
    ],
    name="analysis",
)
draft = LoopWorkflow(
    agents=[
        Agent("writer", "Write the piece from the analyses, or improve it.", "demo"),
        Agent("reviewer", "Score the piece 0-100 with feedback.", "demo", output_type=Review),
    ],
    stop_condition=score_at_least("score", 80),
    max_iterations=5,
    name="draft",
)
editor = Agent("editor", "Polish the reviewed piece for publication.", "demo")

workflow = SequentialWorkflow([research, analysis, draft, editor], name="content")


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    result = asyncio.run(workflow.run(" ".join(sys.argv[1:]) or "A launch post"))
    print(result.text)
