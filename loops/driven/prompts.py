"""What the host and the pipeline's agents are told.

Values from people and agents (the run's message, inputs, outputs, feedback) only ever
become prompt text here, never code or markup."""

from __future__ import annotations

import json

TOOLS_TEXT = """\
You drive a loop over a pipeline of agents that you compose from your pool, using three tools:
- core_start_loop(pipeline, input?): run the agents of `pipeline` once, in order; each step's output is the next step's input. `input` defaults to the task above. It returns loopId, iteration, maxIterations, canIterate and the pipeline's output.
- core_iterate_loop(feedback?): run the same pipeline again. With feedback, its input is {{"previousOutput": <the last output>, "feedback": <your feedback>}}; without, the last output goes in as it is.
- core_finish_loop(result?): close the loop once you are satisfied; the result defaults to the last output.
The loop runs at most {max_iterations} iterations: calling core_iterate_loop after that closes it as exhausted, with the last output as its result. Judge each output, then iterate with feedback or finish. When the loop is closed, answer with your final judgement."""


def render_value(value) -> str:
    """A pipeline value as an agent reads it: text as it is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return "```json\n" + json.dumps(value, ensure_ascii=False, indent=2) + "\n```"


def summary(instructions: str, limit: int = 160) -> str:
    line = " ".join(instructions.strip().splitlines()[0].split()) if instructions.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def host_prompt(spec, run, *, shell_command: str = "") -> str:
    host = spec.host_agent
    loop = spec.loop
    parts = [host.instructions.strip()]
    if run.message:
        parts.append("## Task\n" + run.message)
    if run.inputs:
        lines = [f"- {name}: {value}" for name, value in sorted(run.inputs.items())]
        parts.append("## Inputs\n" + "\n".join(lines))
    pool = "\n".join(
        f"- {agent}: {summary(spec.agents[agent].instructions)}" for agent in loop.pool
    )
    parts.append(
        "## Your loop\n"
        + TOOLS_TEXT.format(max_iterations=loop.max_iterations)
        + f"\nYour pool: {', '.join(loop.pool)}.\n"
        + pool
    )
    if shell_command:
        parts.append(
            "From your shell, call a tool as `$LOOP_TOOL_CMD NAME --argument value`, for example:\n"
            f"$LOOP_TOOL_CMD core_start_loop --pipeline '{json.dumps(list(loop.pool))}'\n"
            '$LOOP_TOOL_CMD core_iterate_loop --feedback "what to change"\n'
            "$LOOP_TOOL_CMD core_finish_loop"
        )
    return "\n\n".join(parts) + "\n"


def step_prompt(agent, value) -> str:
    return agent.instructions.strip() + "\n\n## Input\n" + render_value(value) + "\n"


def lost_attempt_note(told: list, open_loop=None) -> str:
    """What a turn resumed after a lost worker is told first: the tool calls the lost
    attempt made (each (HostCall, its answer or a refusal's words)), which stay done, and
    how to go on. Calls made again in the same order are answered from this record."""
    lines = [
        "## An earlier attempt of this turn was interrupted",
        "The worker running your turn was lost (not your doing). What it did stays done: "
        "nothing below runs again.",
    ]
    if not told:
        lines.append("It made no tool call that changed a loop.")
    for number, (call, answer) in enumerate(told, 1):
        arguments = json.dumps(call.arguments, ensure_ascii=False)
        said = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
        verb = "was refused" if isinstance(answer, str) else "answered"
        lines.append(f"{number}. {call.name}({arguments}) {verb}:\n{render_value(said)}")
    if open_loop is not None:
        lines.append(
            f"Loop {open_loop.pk} is open, after iteration {open_loop.iteration_count} of at "
            f"most {open_loop.max_iterations}: judge its last output above, then iterate with "
            "feedback or finish it; do not start another loop while it is open."
        )
    lines.append(
        "Go on from there. A call above made again, in the same order, is answered from this "
        "record instead of running again."
    )
    return "\n\n".join(lines) + "\n"
