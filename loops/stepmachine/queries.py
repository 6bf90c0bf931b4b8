"""A step-machine run as every surface reads it: the page, the API and `loop status`."""

from __future__ import annotations

from loops.stepmachine.spec import SESSION_KIND
from runs.executor.spec import SpecError, spec_for
from runs.models import NodeRun, Run

from . import gate_commands
from .machine import MachineState, machine_row
from .models import Handoff, ReviewRequest

HANDOFFS_SHOWN = 50


def status_of(run: Run) -> dict:
    row = machine_row(run)
    state = MachineState.of(row) if row is not None else MachineState()
    try:
        spec = spec_for(run)
    except SpecError:
        spec = None
    step = None
    if spec is not None and state.current:
        try:
            found = spec.step(state.current)
            step = {"id": found.id, "kind": found.kind, "sets_status": ""}
            if found.kind == "loop.status":
                step["sets_status"] = getattr(found, "status", "") or ""
        except KeyError:
            step = {"id": state.current, "kind": "?", "sets_status": ""}
    policy = spec.policy if spec is not None else None
    started = row is not None and (row.queued_at is not None or bool(state.current))
    sessions = [
        {
            "role": s.node_id,
            "session": s.generation + 1,
            "status": s.status,
            "turns": s.iteration_count,
            "branch": s.state.get("branch") or "",
            "workdir": s.state.get("workdir") or "",
            "isolation": s.state.get("isolation") or "",
            "session_id": s.state.get("session_id") or "",
            "error": s.error,
        }
        for s in NodeRun.objects.filter(run=run, kind=SESSION_KIND).order_by("id")
    ]
    review = ReviewRequest.objects.filter(run=run).first()
    return {
        "id": run.pk,
        "recipe": spec.id if spec is not None else run.recipe.slug,
        "status": run.status_word,
        "meaning": run.status_meaning,
        "started": started,
        "repository": run.workdir,
        "current_step": step,
        "round": state.round,
        "max_rounds": policy.max_rounds if policy else None,
        "ticks": state.ticks,
        "max_ticks": policy.max_ticks if policy else None,
        "waiting": state.waiting,
        "stale": state.stale,
        "last_progress_at": state.progress_at,
        "last_error": state.last_error,
        "last_handoff_consumed_at": state.consumed_at,
        "error": run.error,
        "sessions": sessions,
        "handoffs": [h.as_dict() for h in handoffs_of(run, state)],
        "review": review_summary(review),
    }


def handoffs_of(run: Run, state: MachineState | None = None) -> list[Handoff]:
    """The latest handoffs, each marked consumed, pending (may still be taken) or stale."""
    if state is None:
        row = machine_row(run)
        state = MachineState.of(row) if row is not None else MachineState()
    rows = list(Handoff.objects.filter(run=run).order_by("-seq")[:HANDOFFS_SHOWN])
    for handoff in rows:
        if handoff.consumed_at:
            handoff.standing = "consumed"
        elif handoff.seq > state.consumed_seq:
            handoff.standing = "waiting to be taken"
        else:
            handoff.standing = "stale: recorded before the last consumed handoff"
    return rows


def review_summary(review: ReviewRequest | None) -> dict | None:
    if review is None:
        return None
    return {
        "branch": review.branch,
        "target_branch": review.target_branch,
        "status": review.status,
        "commits": len(review.commits or []),
        "push": review.push,
        "merged_by": review.merged_by_name or None,
        "merged_at": review.merged_at.isoformat() if review.merged_at else None,
        "merge_commit": review.merge_commit or None,
        "url": review.get_absolute_url(),
    }


def gate_logs_of(run: Run) -> list[dict]:
    """Each `gates.run` of the run with its log's end (the review page): read from the log
    file, else the end its event kept (a log gone, or refused: see gate_commands.log_end)."""
    logs = []
    for event in run.events.filter(kind="gates_finished").order_by("seq"):
        read = gate_commands.log_end(run.pk, event.data.get("log") or "")
        logs.append(
            {
                "step": event.step,
                "result": event.data.get("result"),
                "gates": event.data.get("gates") or [],
                "at": event.created_at,
                "text": gate_commands.log_text(read)
                if read is not None
                else event.data.get("tail") or "",
                "cut": read is not None and read.cut,
            }
        )
    return logs
