"""The run's event log in sentences a person reads, not the JSON the engine stores.

Values in the sentences come from recipes, agents and people: they are returned as plain
text and escaped by the template like everything else.
"""

from __future__ import annotations

from runs import kinds
from runs.engine.durations import say_duration
from runs.models import RunEvent
from runs.outputs import size_words

CHANNEL_WORDS = {
    "until": "the agent said it was done",
    "until_field": "the agent's answer marked it done",
    "until_bash": "the check command passed",
    "stop:target": "its score reached the target",
    "stop:plateau": "its score stopped improving (plateau)",
    "stop:cost_per_point": "its points cost too much (cost_per_point)",
}
EXCERPT = 160


def _short(text: object) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= EXCERPT else text[: EXCERPT - 1] + "…"


def _iteration(data: dict) -> str:
    number = data.get("iteration")
    return f" iteration {number}" if number else ""


def _channels(data: dict) -> str:
    names = data.get("channels") or []
    if not names:
        return ""
    return " — " + ", ".join(CHANNEL_WORDS.get(name, name) for name in names)


def _run_status(kind: str, data: dict) -> str:
    status = kind.removeprefix("run_")
    previous = data.get("previous")
    by = data.get("by")
    if status == "running" and previous in ("failed", "cancelled", "budget_exceeded"):
        return f"{by or 'Someone'} resumed the run."
    if status == "running" and previous not in (None, "", "pending"):
        return "The run goes on."  # after a decision at a gate (said just before), ...
    # A kind's phase (`run_verifying`) is said by the kind (`LoopKind.event_sentence`),
    # else as "The run is now verifying."
    sentence = {
        "running": "The run started.",
        "completed": "The run completed.",
        "failed": "The run failed",
        "cancelled": "The run was cancelled",
        "paused": "The run is waiting for a decision.",
        "pending": "The run is waiting to start.",
        "budget_exceeded": "The run stopped at its budget",
    }.get(status, f"The run is now {status}.")
    error = data.get("error")
    if status == "budget_exceeded":
        return sentence + f" ({data.get('limit', '').replace('_', ' ')}) before its next iteration."
    if status in ("failed", "cancelled"):
        sentence += f": {_short(error)}" if error else "."
    return sentence


def describe(event: RunEvent) -> str:
    """One sentence for one event: a loop kind's own for its events, else the kernel's."""
    for loop_kind in kinds.all_kinds():
        if (said := loop_kind.event_sentence(event)) is not None:
            return said
    data = event.data or {}
    kind, step = event.kind, event.step
    # Each family of events says its own, or None when the event is not of it.
    for family in (_about_run, _about_node, _about_iteration, _about_gate, _about_more):
        if (said := family(kind, step, data)) is not None:
            return said
    return f"{kind.replace('_', ' ').capitalize()}{' at ' + step if step else ''}."


def _where(step: str, data: dict) -> str:
    return f"{step}{_iteration(data)}"


def _about_run(kind: str, step: str, data: dict) -> str | None:
    """The run's own events: created, forked, its status, its budget."""
    if kind == "run_created":
        by = data.get("by") or "someone"
        version = data.get("version")
        return f"{by} started the run on recipe {data.get('recipe', '')} version {version}."
    if kind == "run_forked":
        extra = f" with the feedback “{_short(data['feedback'])}”" if data.get("feedback") else ""
        prompt = " and a new prompt" if data.get("prompt_changed") else ""
        return (
            f"{data.get('by') or 'Someone'} forked run {data.get('from_run')} after "
            f"{_where(step, data)}: {data.get('carried_iterations', 0)} iteration(s) carried "
            f"over{extra}{prompt}."
        )
    if kind.startswith("run_"):
        return _run_status(kind, data)
    if kind == "budget_warning":
        return f"The budget is nearly spent: {data.get('percent')} % of its {_limit(data)}."
    if kind == "budget_changed":
        limits = ", ".join(f"{k} {v}" for k, v in (data.get("budget") or {}).items()) or "none"
        return f"{data.get('by') or 'Someone'} set the budget: {limits}."
    if kind == "budget_soft_reached":
        return (
            f"The soft budget's {_limit(data)} is reached before {step}'s next iteration: "
            "a person decides whether to go on."
        )
    return None


def _about_node(kind: str, step: str, data: dict) -> str | None:
    """A node's life: queued, started, ended, handed on; a loop started; its child runs."""
    if kind == "node_queued":
        return f"{_where(step, data)} is queued."
    if kind == "node_started":
        return f"{_where(step, data)} started."
    if kind == "node_completed":
        return f"{step} completed."
    if kind == "node_failed":
        return f"{step} failed: {_short(data.get('error'))}"
    if kind == "node_skipped":
        return f"{step} was skipped: {_short(data.get('reason'))}"
    if kind == "node_requeued":
        return f"{step} was handed to another worker (attempt {data.get('attempts')})."
    if kind == "loop_started":
        return f"Loop {step} started (at most {data.get('max_iterations')} iterations)."
    if kind == "child_run_started":
        return f"{step} started child run {data.get('child')}{_item(data)}."
    if kind == "child_run_finished":
        return f"Child run {data.get('child')}{_item(data)} of {step} {data.get('status')}."
    if kind == "child_run_resumed":
        return f"{step} resumed child run {data.get('child')}."
    return None


def _about_iteration(kind: str, step: str, data: dict) -> str | None:
    """An iteration's life, and what its agent did."""
    where = _where(step, data)
    if kind == "iteration_queued":
        extra = " with feedback" if data.get("feedback") else ""
        return f"{where} is queued{extra}."
    if kind == "iteration_started":
        attempt = data.get("attempt")
        extra = f" (attempt {attempt})" if attempt and attempt > 1 else ""
        return f"{where} started{extra}."
    if kind == "iteration_completed":
        timed_out = " after timing out" if data.get("timed_out") else ""
        return f"{where} finished{timed_out}{_channels(data)}."
    if kind == "iteration_failed":
        return f"{where} failed: {_short(data.get('error'))}"
    if kind == "iteration_requeued":
        return f"{where} was handed to another worker (attempt {data.get('attempts')})."
    if kind == "stop_rule_fired":
        does = "opens a gate" if data.get("then") == "gate" else "ends the loop"
        return (
            f"After iteration {data.get('iteration')} of {step}, the stop rule "
            f"{data.get('rule')} fired and {does}: {_short(data.get('reason'))}."
        )
    if kind == "score_missing":
        why = _short(data.get("error") or data.get("reason"))
        return f"{where} has no score" + (f": {why}" if why else ".")
    if kind == "python_iteration_checked":
        met = "was met" if data.get("condition_met") else "was not met"
        return f"After iteration {data.get('iteration')} of {step}, the stop condition {met}."
    if kind == "agent_tool":
        detail = _short(data.get("detail"))
        return f"The agent at {where} used {data.get('tool')}" + (f": {detail}" if detail else ".")
    return None


def _about_gate(kind: str, step: str, data: dict) -> str | None:
    """A gate: opened, decided, a decision kept for later, a reminder, an escalation."""
    if kind == "approval_requested":
        return f"Waiting for a decision at {step}."
    if kind == "gate_decided":
        return _decision(step, data)
    if kind == "decision_recorded":
        return (
            f"{data.get('by') or 'Someone'} recorded a decision at {step} ({data.get('outcome')});"
            " the run goes on with it when resumed."
        )
    if kind == "gate_reminded":
        waited = say_duration(data.get("waited_seconds") or 0)
        by = data.get("by") or "the sweep"
        return (
            f"{by} sent a reminder: the gate at {_where(step, data)} has waited {waited} "
            "(gate_timeout)."
        )
    if kind == "gate_escalated":
        return _escalation(step, data)
    if kind == "gate_approval_counted":
        return _approval_counted(step, data)
    return None


def _escalation(step: str, data: dict) -> str:
    """The sweep told `escalate_to` at a gate's first deadline."""
    waited = say_duration(data.get("waited_seconds") or 0)
    after = say_duration(data.get("after_seconds") or 0)
    then = f"; then {data['then']}" if data.get("then") else ""
    return (
        f"{data.get('by') or 'the sweep'} escalated the gate at {_where(step, data)} to "
        f"{', '.join(data.get('to') or [])}: nobody decided within {waited} (gate_timeout); "
        f"they have {after} more (escalate_after){then}."
    )


def _about_more(kind: str, step: str, data: dict) -> str | None:
    """What a step left behind (files changed, a long output), and a driven loop's crumbs."""
    if kind == "worktree_diff":
        return f"{_where(step, data)} changed files in the worktree."
    if kind == "output_truncated":
        cap = size_words(int(data.get("at_bytes") or 0))
        return (
            f"The output of {_where(step, data)} passed {cap}: the run keeps its last {cap}, "
            "and the whole output as a file to download."
        )
    if kind.startswith("loop:"):
        return _crumb(kind, data)
    return None


def _crumb(kind: str, data: dict) -> str:
    """A driven loop's crumbs."""
    loop = f"Loop {data.get('loopId')}"
    if kind == "loop:start":
        pipeline = " → ".join(map(str, data.get("pipeline") or []))
        return f"{loop} started: {pipeline} (at most {data.get('maxIterations')} iterations)."
    if kind == "loop:iteration:start":
        return f"{loop} iteration {data.get('iteration')} started."
    if kind == "loop:iteration:end":
        return f"{loop} iteration {data.get('iteration')} ended: {_short(data.get('output'))}"
    if kind == "loop:end":
        count = data.get("iterations")
        plural = "" if count == 1 else "s"
        return f"{loop} ended {data.get('status')} after {count} iteration{plural}."
    return f"{loop}: {kind}."


def _item(data: dict) -> str:
    index = data.get("index")
    return f" (item {index})" if index is not None else ""


def _limit(data: dict) -> str:
    from recipes.formats.budget import LABELS

    return LABELS.get(data.get("limit"), str(data.get("limit")))


def _decision(step: str, data: dict) -> str:
    by = data.get("by") or "someone"
    status = data.get("status")
    verb = {
        "accepted": "accepted",
        "iterated": "asked for another iteration at",
        "rejected": "rejected",
        "cancelled": "cancelled the gate at",
        "timed_out": "closed the gate at",
    }.get(status, status or "decided")
    if data.get("decision") and status in ("accepted", "iterated", "rejected"):
        verb = f"chose “{data['decision']}” at"
    elif status == "accepted" and data.get("iteration"):
        verb = "accepted"  # a loop's iteration
        step = f"{step}{_iteration(data)}"
    elif status == "accepted":
        verb = "approved"
    comment = _short(data.get("comment"))
    via = f" (via {data['surface']})" if data.get("surface") else ""
    return f"{by} {verb} {step}{via}" + (f": “{comment}”" if comment else ".")


def _approval_counted(step: str, data: dict) -> str:
    """One approval of a quorum still short (runs.decisions._short_of_quorum)."""
    by = data.get("by") or "someone"
    count = f"{data.get('approvals')} of {data.get('needed')}"
    return f"{by} approved “{data.get('decision')}” at {step}: {count} approvals, still waiting."
