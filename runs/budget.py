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

from recipes.formats.budget import LABELS, LIMITS, clean_limit, title
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
    # A soft limit asks a person before the next iteration instead of stopping the run.
    soft: bool = False

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
            "soft": self.soft,
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
    soft = soft_limits(run)
    return [
        LimitState(name, Decimal(str(run.budget[name])), used[name], stopped, name in soft)
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
        if over.name in soft_limits(run) and hold.get("action") != "node":
            return not ask_to_go_on(run, row, hold, columns, over)
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


# --- soft budgets: reaching a soft limit asks a person at a gate (Gate.Kind.BUDGET) ------

CONTINUE, STOP = "continue", "stop"
# The forecast reads this many of the run's latest iterations; the gate offers as many more.
TRAILING = 3


def soft_limits(run) -> list[str]:
    """The run's limits that ask before going on (recipes.formats.budget.clean_soft)."""
    return list((run.budget or {}).get("soft") or [])


@dataclass(frozen=True)
class Forecast:
    """What the next iteration will likely take: the mean of the run's latest iterations."""

    based_on: int
    cost_usd: Decimal | None
    tokens: Decimal | None
    seconds: Decimal | None

    def per_iteration(self, name: str) -> Decimal | None:
        return {
            "cost_usd": self.cost_usd,
            "tokens": self.tokens,
            "wall_seconds": self.seconds,
            "iterations": Decimal(1),
        }[name]

    def as_dict(self) -> dict:
        return {
            "based_on": self.based_on,
            "cost_usd": None if self.cost_usd is None else str(self.cost_usd),
            "tokens": None if self.tokens is None else int(self.tokens),
            "seconds": None if self.seconds is None else int(self.seconds),
        }


def forecast(run) -> Forecast:
    """The next iteration's cost, tokens and time, from the run's own latest `TRAILING`
    finished loop iterations (a fork's carried-over history is not the run's spending)."""
    from runs.models import Iteration, NodeRun

    latest = list(
        Iteration.objects.filter(run=run, carried_from__isnull=True, finished_at__isnull=False)
        .exclude(node_run__kind__in=NodeRun.SINGLE_CALLS)
        .filter(status__in=[Iteration.Status.COMPLETED, Iteration.Status.TIMED_OUT])
        .order_by("-finished_at", "-id")
        .values("cost_usd", "tokens_in", "tokens_out", "duration_ms")[:TRAILING]
    )

    def mean(values) -> Decimal | None:
        known = [Decimal(v) for v in values if v is not None]
        return sum(known, Decimal(0)) / len(known) if known else None

    return Forecast(
        based_on=len(latest),
        cost_usd=mean(it["cost_usd"] for it in latest),
        tokens=mean(
            (it["tokens_in"] or 0) + (it["tokens_out"] or 0)
            for it in latest
            if it["tokens_in"] is not None or it["tokens_out"] is not None
        ),
        seconds=mean(it["duration_ms"] / 1000 for it in latest if it["duration_ms"] is not None),
    )


def offered(state: LimitState, expected: Forecast) -> Decimal:
    """How much more the gate offers: `TRAILING` iterations' worth of the reached limit
    (at least a cent, a token, a second or an iteration)."""
    each = expected.per_iteration(state.name)
    if state.name == "cost_usd":
        return max((each or Decimal("0.01")) * TRAILING, Decimal("0.01")).quantize(
            Decimal("0.0001")
        )
    return Decimal(max(int((each or 1) * TRAILING + Decimal("0.5")), 1))


def forecast_words(expected: Forecast) -> str:
    if not expected.based_on:
        return "No iteration has finished yet to forecast from."
    parts = []
    if expected.cost_usd is not None:
        parts.append(f"${expected.cost_usd:.4f}")
    if expected.tokens is not None:
        parts.append(f"{int(expected.tokens):,} tokens")
    if expected.seconds is not None:
        parts.append(f"{int(expected.seconds + Decimal('0.5')):,} s")
    taken = " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts)
    return (
        f"The next iteration will take about {taken or 'nothing reported'} "
        f"(the mean of the last {expected.based_on})."
    )


def ask_to_go_on(run, row, hold: dict, columns: dict | None, over: LimitState) -> bool:
    """A soft limit is reached before `row`'s next iteration: the node waits at a budget
    gate, keeping `hold` (what `gate_decided` starts), the forecast in its message. False
    when the node had already ended (nothing was written)."""
    from runs.models import Gate

    expected = forecast(run)
    amount = offered(over, expected)
    more = over.shown(amount)
    columns = dict(columns or {})
    columns["state"] = {**columns.get("state", row.state), HOLD: hold}
    message = (
        f"Soft budget reached — {over.words}. {forecast_words(expected)} "
        f"Continue for about {more} more, or stop here."
    )
    decisions = [
        {
            "id": CONTINUE,
            "label": f"Continue for about {more} more",
            "limit": over.name,
            "amount": str(amount),
        },
        {"id": STOP, "label": "Stop here"},
    ]
    gate = row.pause(
        run, kind=Gate.Kind.BUDGET, message=message, decisions=decisions, columns=columns
    )
    if gate is None:
        return False
    run.append_event(
        "budget_soft_reached",
        row.node_id,
        gate=gate.pk,
        **over.as_dict(),
        forecast=expected.as_dict(),
        offered=str(amount),
    )
    return True


def amount_given(gate, comment: str) -> Decimal:
    """How much a `continue` adds to the reached limit: the amount the reviewer wrote (in
    the limit's unit), else what the gate offered. ServiceError for anything else."""
    from runs.errors import ServiceError

    offer = next(d for d in gate.decisions if d["id"] == CONTINUE)
    text = (comment or "").strip().removeprefix("$")
    if not text:
        return Decimal(offer["amount"])
    try:
        return Decimal(str(clean_limit(offer["limit"], text)))
    except ValueError as exc:
        raise ServiceError(f"The amount to add {exc}.") from None


def check_gate_decision(gate, action: str, comment: str, decision: str) -> None:
    """A budget gate's `continue` carries an amount that must read as one."""
    if gate.kind == "budget" and action == "approve" and decision == CONTINUE:
        amount_given(gate, comment)


def gate_decided(run, gate, row, status: str, actor) -> None:
    """`continue`: the reached limit becomes what is spent plus the amount, and the held
    iteration starts.
    `stop` (or a reject): the run stops at its budget as at a hard limit, the iteration
    still held, so raising the budget later resumes it."""
    from runs.models import Gate

    offer = next(d for d in gate.decisions if d["id"] == CONTINUE)
    name = offer["limit"]
    if status == Gate.Status.ACCEPTED and gate.decision == CONTINUE:
        amount = amount_given(gate, gate.comment)
        # "About $X more" from here: what is already spent past the limit is not the offer.
        reached = next(s for s in limits(run) if s.name == name)
        raised = max(reached.limit, reached.spent) + amount
        value = clean_limit(name, str(raised) if name == "cost_usd" else int(raised))
        run.budget = {**run.budget, name: value}
        type(run).objects.filter(pk=run.pk).update(budget=run.budget)
        run.append_event("budget_changed", budget=run.budget, by=actor.name, surface=actor.surface)
        hold = row.release_hold()
        kinds.of_run(run).begin_iteration(
            run, row, hold["number"], feedback=hold["feedback"], after_gate=hold["after_gate"]
        )
        return
    state = next(s for s in limits(run) if s.name == name)
    state = replace(state, stopped=True)
    run.stop_at_budget(
        f"Stopped at its soft budget by {actor.name}: {state.words}. "
        "Raise the budget and resume to go on.",
        **state.as_dict(),
        node=row.node_id,
    )
