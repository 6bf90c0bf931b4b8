"""Budgets on the run kernel: what a run has spent against its limits, the one check made
between iterations, and resuming once an operator raised a limit.

Every loop kind passes here before an iteration starts: `NodeRun.start_iteration` (workflow
loops and loop_groups, and any kind that creates its iterations through it) and the Python
recording host before a new agent call. The check runs under the run's lock, so it never
interrupts an agent in the middle of a write: a limit reached during an iteration lets that
iteration finish and stops the run before the next one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from decimal import Decimal

from django.db.models import Count, Q, Sum
from django.utils import timezone

from recipes.formats.budget import LABELS, LIMITS, title
from runs import dispatch, kinds
from runs.models.node import HOLD

WARN_AT = Decimal("0.8")


@dataclass(frozen=True)
class LimitState:
    name: str
    limit: Decimal
    spent: Decimal
    # The run stands stopped by its budget (budget_exceeded): a limit reached then is the
    # one it exceeded. A run that finished at its limit used it up and exceeded nothing.
    stopped: bool = False

    @property
    def label(self) -> str:
        return LABELS[self.name]

    @property
    def fraction(self) -> Decimal:
        return self.spent / self.limit if self.limit else Decimal(0)

    @property
    def percent(self) -> int:
        return int(min(self.fraction, Decimal("9.99")) * 100)

    @property
    def warning(self) -> bool:
        return WARN_AT <= self.fraction < 1

    @property
    def reached(self) -> bool:
        """All of it spent: no further iteration may start (`allows_next_iteration`)."""
        return self.spent >= self.limit

    @property
    def exceeded(self) -> bool:
        """Reached, and the run was stopped by it (not merely finished at it)."""
        return self.stopped and self.reached

    @property
    def flag(self) -> str:
        """Where the limit stands, in the words every surface shows beside its meter."""
        if self.exceeded:
            return "stopped the run"
        if self.reached:
            return "all used"
        return "nearly spent" if self.warning else ""

    def shown(self, value: Decimal) -> str:
        if self.name == "cost_usd":
            return f"${value:.4f}".rstrip("0").rstrip(".") if value else "$0"
        return f"{int(value):,}"

    @property
    def words(self) -> str:
        return f"{self.label}: {self.shown(self.spent)} of {self.shown(self.limit)}"

    def as_dict(self) -> dict:
        return {
            "limit": self.name,
            "allowed": str(self.limit),
            "spent": str(self.spent),
            "percent": self.percent,
            "warning": self.warning,
            "reached": self.reached,
            "exceeded": self.exceeded,
        }


def usage_totals(run_ids: list[int], *, own_only: bool = False) -> dict[int, dict]:
    """What each run spent, in one grouped query for all of them: what counts against a
    budget and what a run's page shows. Every agent call is an iteration (a prompt step's
    too, NodeRun.SINGLE_CALLS), so usage is the iterations' sum; `own_only` leaves out what
    a fork carried over, as the budget does. Per run: tokens_in, tokens_out, cost_usd (None
    when nothing reported them), `unpriced` (usage with no known price) and `iterations`
    (loops' iterations, not pending: what the `iterations` limit counts)."""
    totals = {
        pk: {
            "tokens_in": None,
            "tokens_out": None,
            "cost_usd": None,
            "unpriced": 0,
            "iterations": 0,
        }
        for pk in run_ids
    }
    from runs.models import Iteration, NodeRun

    iterations = Iteration.objects.filter(run_id__in=run_ids)
    if own_only:
        iterations = iterations.filter(carried_from__isnull=True)
    of_loops = ~Q(status=Iteration.Status.PENDING) & ~Q(node_run__kind__in=NodeRun.SINGLE_CALLS)
    for row in (
        iterations.values("run_id")
        .annotate(
            sum_in=Sum("tokens_in"),
            sum_out=Sum("tokens_out"),
            sum_cost=Sum("cost_usd"),
            unpriced=Count("id", filter=Q(tokens_in__isnull=False, cost_usd__isnull=True)),
            count=Count("id", filter=of_loops),
        )
        .order_by()
    ):
        total = totals[row["run_id"]]
        total.update(
            tokens_in=row["sum_in"],
            tokens_out=row["sum_out"],
            cost_usd=row["sum_cost"],
            unpriced=row["unpriced"],
            iterations=row["count"],
        )
    return totals


def spent(run) -> dict[str, Decimal]:
    """The run's own work so far (a fork's carried-over history is not counted)."""
    return _used(usage_totals([run.pk], own_only=True)[run.pk], run, timezone.now())


def _used(totals: dict, run, now) -> dict[str, Decimal]:
    """What a limit is measured against, from `usage_totals`' totals of the run."""
    started = run.started_at or now
    # A finished run's clock stopped with it: its wall time does not grow while it rests.
    ended = run.finished_at or now
    return {
        "cost_usd": Decimal(totals["cost_usd"] or 0),
        "tokens": Decimal((totals["tokens_in"] or 0) + (totals["tokens_out"] or 0)),
        "iterations": Decimal(totals["iterations"]),
        "wall_seconds": Decimal(int((ended - started).total_seconds())),
    }


def limits(run, used: dict | None = None) -> list[LimitState]:
    """Each limit the run has, with what it spent; empty without a budget (no query)."""
    if not run.budget:
        return []
    from runs.models import Run

    used = used if used is not None else spent(run)
    stopped = run.status == Run.Status.BUDGET_EXCEEDED
    return [
        LimitState(name, Decimal(str(run.budget[name])), used[name], stopped)
        for name in LIMITS
        if name in run.budget
    ]


def attach_limits(runs) -> None:
    """`budget_limits` on each run of a list (the inbox): two grouped queries for all."""
    for run in runs:
        run.budget_limits = []
    with_budget = {run.pk: run for run in runs if run.budget}
    if not with_budget:
        return
    now = timezone.now()
    for pk, totals in usage_totals(list(with_budget), own_only=True).items():
        run = with_budget[pk]
        run.budget_limits = limits(run, _used(totals, run, now))


def error_words(key: str, message: str) -> str:
    """A limit refused, as every page says it: "Iterations: must be ..." (`key` as the
    services name it, "budget.iterations", or the bare limit)."""
    name = key.removeprefix("budget.")
    return f"{title(name) if name in LIMITS else name}: {message}"


def stop_message(state: LimitState) -> str:
    return (
        f"Stopped by its budget before the next iteration: {state.words}. "
        "Raise the budget and resume to go on."
    )


def allows_next_iteration(run, row, hold: dict, columns: dict | None = None) -> bool:
    """May `row` start another iteration? The caller holds the run's lock. When not, the
    run stops as budget_exceeded and `row` keeps `hold` (what to do on resume); `columns`,
    what the caller's transition would have written with the move, are written with it."""
    from runs.models import Run

    if run.status != Run.Status.BUDGET_EXCEEDED:
        if not run.budget:
            return True
        states = limits(run)
        _warn_once(run, [s for s in states if s.warning])
        over = next((s for s in states if s.reached), None)
        if over is None:
            return True
        over = replace(over, stopped=True)  # what it says from now on: stopped by this limit
        run.stop_at_budget(stop_message(over), **over.as_dict(), node=row.node_id)
    # The node waits (paused, no lease) and keeps what it will do on resume.
    row.hold_for_budget(hold, columns)
    return False


def _warn_once(run, states: list[LimitState]) -> None:
    if not states:
        return
    warned = set(run.events.filter(kind="budget_warning").values_list("data__limit", flat=True))
    for state in states:
        if state.name not in warned:
            run.append_event("budget_warning", **state.as_dict())


def resume_held_work(run) -> list[str]:
    """Give back what the stop held (the caller holds the run's lock and has moved the run
    back to running): each held node starts the iteration it was about to start, or goes
    back to its worker. The scheduler then advances what finished meanwhile."""
    from runs.models import NodeRun

    kind = kinds.of_run(run)
    resumed = []
    for row in NodeRun.objects.select_for_update().filter(run=run, state__has_key=HOLD):
        hold = row.release_hold()
        if hold.get("action") == "node":
            if not row.requeue_held(run):
                continue  # it ended meanwhile (cancelled with its run): nothing to give back
        else:
            started = kind.begin_iteration(
                run, row, hold["number"], feedback=hold["feedback"], after_gate=hold["after_gate"]
            )
            if started is None:
                continue  # it ended meanwhile: nothing started
        resumed.append(row.node_id)
    dispatch.send_on_commit("advance_run", run.pk)
    return resumed
