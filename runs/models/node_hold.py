"""A node the run's budget holds (runs.budget): NodeRun's transitions into and out of the
hold, which waits, paused, keeping what the node will do on resume in its state."""

HOLD = "budget_hold"  # in `state`: {"number", "feedback", "after_gate"} or {"action": "node"}


class BudgetHold:
    """Mixed into NodeRun (runs/models/node.py), whose `_move` it uses."""

    def hold_for_budget(self, hold: dict, columns=None) -> bool:
        """The run's budget stopped it before its next step: it waits, paused with no lease,
        keeping `hold` (what to do on resume, runs.budget) in its state."""
        columns = dict(columns or {})
        columns["state"] = {**columns.get("state", self.state), HOLD: hold}
        return self._move(
            self.Status.PAUSED, allowed=self.UNFINISHED, **columns, lease_expires_at=None
        )

    def release_hold(self) -> dict:
        """Take back what `hold_for_budget` kept (the caller resumes it): its hold."""
        state = dict(self.state)
        hold = dict(state.pop(HOLD))
        type(self).objects.filter(pk=self.pk).update(state=state)
        self.state = state
        return hold

    def requeue_held(self, run) -> bool:
        """A node the budget held before it started goes back to its worker (queued)."""
        if not self._move(self.Status.PENDING, allowed=self.UNFINISHED, lease_expires_at=None):
            return False
        self.queue(run)
        return True
