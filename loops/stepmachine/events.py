"""A step machine's events as sentences (runs.event_text asks here for these kinds)."""

from __future__ import annotations


def _short(text, limit: int = 160) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tick(step: str, data: dict) -> str:
    result = data.get("result")
    what = {
        "advance": "done",
        "gates": "running its gates",
        "pause": "waiting for a person",
        "end": "ended the run",
        "failed": "failed",
    }.get(result, result or "done")
    return f"Tick {data.get('number')}: {step} ({data.get('kind')}) — {what}."


def _stopped(said: str):
    """A phase the machine stopped in until a person steps in, with why."""
    return lambda s, d: said + (f": {_short(d.get('error'))}" if d.get("error") else ".")


SENTENCES = {
    # The run entering one of its phases (Run.set_status / set_phase log `run_<phase>`).
    "run_observing": lambda s, d: "The run is observing.",
    "run_verifying": lambda s, d: "The run is verifying.",
    "run_blocked": _stopped("The run is blocked"),
    "run_needs_human": _stopped("The run needs a person"),
    "run_approved": lambda s, d: "The run is approved: ready for a person to merge.",
    "run_completed_unreviewed": lambda s, d: "The run completed; nobody has reviewed it yet.",
    "run_merged": lambda s, d: (
        f"{d.get('by') or 'Someone'} merged the review request: the run is done."
    ),
    "run_nothing_to_merge": lambda s, d: "Nothing to merge: the run is done.",
    "machine_started": lambda s, d: f"The step machine started at {d.get('first_step')}.",
    "session_started": lambda s, d: (
        f"A new {s} session (#{d.get('session')}) started"
        + (f" on branch {d['branch']}" if d.get("branch") else "")
        + (f", replacing #{d['replaces']}" if d.get("replaces") else "")
        + "."
    ),
    "session_reused": lambda s, d: (
        f"The {s} session #{d.get('session')} was prompted again (turn {d.get('turn')})."
    ),
    "turn_sent": lambda s, d: (
        f"{d.get('from_step')} sent turn {d.get('turn')} to the {s} session #{d.get('session')}."
    ),
    "tick": _tick,
    "step_waiting": lambda s, d: f"{s} waits: {_short(d.get('reason'))}.",
    "ticks_paused": lambda s, d: (
        f"Paused at {s} after {d.get('limit')} steps in one go; tick again to continue."
    ),
    "tick_requested": lambda s, d: f"{d.get('by') or 'someone'} asked for a tick.",
    "handoff_recorded": lambda s, d: (
        f"{d.get('by') or s} handed off {d.get('status')}"
        + (f": “{_short(d.get('summary'))}”" if d.get("summary") else ".")
    ),
    "handoff_consumed": lambda s, d: f"{s} took the {d.get('role')} handoff ({d.get('status')}).",
    "gates_started": lambda s, d: f"{s} runs its gates: {', '.join(d.get('gates') or [])}.",
    "gates_finished": lambda s, d: f"{s}: the gates ended {d.get('result')}.",
    "round_started": lambda s, d: f"Round {d.get('round')} of at most {d.get('max_rounds')}.",
    "loop_event": lambda s, d: f"Loop event {d.get('event')} (from {s}).",
    "run_stale": lambda s, d: f"The run is stale: no progress since {d.get('since')}.",
    "review_requested": lambda s, d: (
        f"Review requested: {d.get('branch')} → {d.get('target')} ({d.get('commits')} commit(s))."
    ),
    "review_skipped": lambda s, d: f"No review request: {_short(d.get('reason'))}.",
    "review_nothing_to_merge": lambda s, d: (
        f"Nothing to merge: {d.get('target')} already has every commit of {d.get('branch')}."
    ),
    "review_merged": lambda s, d: f"{d.get('by')} merged {d.get('branch')} into {d.get('target')}.",
    "review_merge_refused": lambda s, d: f"Merge refused: {_short(d.get('reason'))}",
}


def describe(event) -> str | None:
    sentence = SENTENCES.get(event.kind)
    return sentence(event.step, event.data or {}) if sentence else None
