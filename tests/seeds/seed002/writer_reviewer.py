# What the book defines elsewhere: the imports, and a `model` (here the console's demo agent).
from loops.python import Agent, AgentResult, LoopWorkflow
from runs.providers.demo import DemoProvider

model = DemoProvider(delay=0)

# --- the design's example, verbatim ---
from pydantic import BaseModel

class Review(BaseModel):
    content: str
    score: int  # 0-100
    feedback: str

writer = Agent(
    model=model,
    name="writer",
    instructions="Write content or improve it based on feedback."
)
reviewer = Agent(
    model=model,
    name="reviewer",
    instructions="Evaluate the writing and provide a score (0-100) with feedback.",
    output_type=Review
)

def quality_reached(result: AgentResult, iteration: int) -> bool:
    """Stop if score is 80 or higher"""
    if isinstance(result.output, Review):
        return result.output.score >= 80
    return False

workflow = LoopWorkflow(
    agents=[writer, reviewer],
    stop_condition=quality_reached,
    max_iterations=5,
)
result = await workflow.run("Write marketing copy")
