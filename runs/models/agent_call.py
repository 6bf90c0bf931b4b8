"""What an agent call leaves on its iteration: the row's columns from what the provider
returned, the call's conversation and tool use, and the payload of the iteration's events.

The events are the API's and the live stream's contract, so each has one shape whatever
the loop kind that ran the iteration (a workflow loop, a loop_group, a step machine's
turn, a Python loop's call, a driven loop's turn or pipeline step); a key a kind has no
value for is there, as None:

- `iteration_started`: `iteration`, `attempt`;
- `iteration_completed` and `iteration_failed`: `iteration`, `channels` (the completion
  channels that fired; None when the iteration failed), `timed_out` (the agent went
  silent past its idle timeout), `duration_ms` (wall time from the claim to the end, as
  the row keeps it), `error` (None when it completed).

Built only here: `Iteration.start` / `complete` / `fail` log them, and the one-statement
path (runs/models/batched.py) writes the same dicts.
"""

from __future__ import annotations

from runs.engine.stop_rules import score_in

STARTED_KEYS = ("iteration", "attempt")
ENDED_KEYS = ("iteration", "channels", "timed_out", "duration_ms", "error")
EVENT_KEYS = {
    "iteration_started": STARTED_KEYS,
    "iteration_completed": ENDED_KEYS,
    "iteration_failed": ENDED_KEYS,
}


def started_data(number: int, attempt: int) -> dict:
    return {"iteration": number, "attempt": attempt}


def completed_data(number: int, *, channels, timed_out: bool, duration_ms) -> dict:
    return {
        "iteration": number,
        "channels": list(channels),
        "timed_out": bool(timed_out),
        "duration_ms": duration_ms,
        "error": None,
    }


def failed_data(number: int, *, error: str, timed_out: bool, duration_ms) -> dict:
    return {
        "iteration": number,
        "channels": None,
        "timed_out": bool(timed_out),
        "duration_ms": duration_ms,
        "error": error,
    }


def answer_fields(outcome) -> dict:
    """The iteration's columns for what a provider returned (an AgentOutcome,
    runs/executor/agent.py, as `OutputStream.keep` left it); a structured answer's own
    `score` is the iteration's score (`score_in`) unless its kind scores it otherwise."""
    result = outcome.result
    given = score_in(outcome.payload)
    scored = {} if given is None else {"score": given, "score_detail": {"source": "output"}}
    return {
        **scored,
        "raw_output": outcome.raw,
        "output": outcome.text,
        "structured": outcome.payload,
        "session_id": result.session_id or "",
        "tokens_in": result.tokens_in,
        "tokens_out": result.tokens_out,
        "cost_usd": result.cost_usd,
        **outcome.fields,
    }


def record_call(run, node_id: str, iteration: int | None, result, provider: str) -> None:
    """Keep what an agent call returned besides its answer: the conversation of its session,
    an `agent_tool` event per tool it used and a `worktree_diff` event for what it changed.
    Called in the transaction that finishes the call, after the ownership check (the caller
    holds the run's lock): a call that lost its claim leaves none of them."""
    from runs.providers import history

    if result.conversation is not None and result.session_id:
        history.save(result.session_id, provider, result.conversation)
    for call in result.tool_calls:
        run.append_event("agent_tool", node_id, iteration=iteration, **call)
    if result.worktree_diff:
        run.append_event("worktree_diff", node_id, **result.worktree_diff)
