"""The step machine's sweep passes, registered with the kernel's sweep
(`LoopKind.sweep_passes`, each called as `(now, stale, counts)`)."""

from __future__ import annotations

from runs import dispatch

from .machine import lost_ticks, mark_stale


def resend_lost_ticks(now, stale, counts) -> None:
    """A step machine holds no lease between ticks: its wake-up (the start, or the tick a
    handoff, a turn's end or a decision sends) lost with the broker would leave it idle
    for good. Send it again when something was logged after its last tick stopped
    (machine.lost_ticks)."""
    for task_name, run_id in lost_ticks(stale):
        dispatch.send_now(task_name, run_id)
        counts["advanced"] += 1


def mark_stale_machines(now, stale, counts) -> None:
    """Step machines without progress for longer than their `policy.stale_after_ms`: marked
    stale, for a person to see (machine.mark_stale)."""
    counts["stale"] += mark_stale(now)
