"""Read-side queries for the inbox, the console's home page (refreshed live), and the one
ranking of what needs attention (`ranked_attention`), which the inbox, GET /api/inbox and
the MCP tool `inbox` all show.

Bounded like runs.queries: a fixed number of queries whatever the size of the tables, and
counts capped instead of counting every run.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.db import connection
from django.db.models import F, Max, Q, Window
from django.db.models.functions import RowNumber
from django.urls import reverse
from django.utils import timezone
from django.utils.timesince import timesince

from console.projects import visible
from runs import kinds
from runs.engine.stop_rules import GATE as THEN_GATE
from runs.engine.stop_rules import Plateau, Point, plateau_near, rules_from
from runs.models import Gate, Iteration, NodeRun, Run
from runs.queries import kind_context

# The inbox refreshes live: counting a status stops here ("1000+"), so a refresh reads at
# most this many index entries per status however many runs the table holds.
STATUS_COUNT_CAP = 1000


def runs_seen(user=None):
    """The runs the inbox reads: those `user` may see (None: every run, for a caller that
    checked already)."""
    return Run.objects.all() if user is None else Run.objects.visible_to(user)


def gates_seen(user=None):
    """The gates of `runs_seen(user)`."""
    gates = Gate.objects.all()
    return gates if user is None else visible(gates, user, "runs.view_run", "run__project")


def capped_status_counts(user=None) -> list[tuple[str, str]]:
    """(status, shown count) for every status a run `user` may see shows (`Run.status_words`:
    the kernel's and each kind's phases), in one query bounded by the cap."""
    words = Run.status_words()
    selects, params = [], []
    for word in words:
        capped = runs_seen(user).filter(Run.showing(word)).order_by().values_list("pk")
        sql, own = capped[: STATUS_COUNT_CAP + 1].query.sql_with_params()
        selects.append(f"SELECT %s, (SELECT COUNT(*) FROM ({sql}) AS capped)")
        params += [word, *own]
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(selects), params)
        counts = dict(cursor.fetchall())
    return [
        (word, f"{STATUS_COUNT_CAP}+" if counts[word] > STATUS_COUNT_CAP else str(counts[word]))
        for word in words
    ]


def shown_status_counts(user=None) -> tuple[list[tuple[str, str]], str]:
    """The inbox's chips: the statuses some run shows (a chip per status no run has would
    fill a phone's screen), and the total of all of them, "N+" when a count was capped."""
    counts = capped_status_counts(user)
    total = sum(int(count.rstrip("+")) for _, count in counts)
    capped = any(count.endswith("+") for _, count in counts)
    return [(word, count) for word, count in counts if count != "0"], f"{total}{'+' * capped}"


def attention_candidates(user=None) -> tuple[list[Gate], list[Run], list[Run]]:
    """What may need attention of the runs `user` may see (None: of every run), each list
    bounded: the pending gates (the 50 oldest), the runs waiting for a person
    (`needs_a_person`) and the pending or running runs (the 20 newest of each). A run
    stopped by its budget is not running: it waits for a person."""
    gates = list(
        gates_seen(user)
        .filter(status=Gate.Status.PENDING)
        .select_related("run__recipe", "run__started_by", "run__project", "iteration", "node_run")
        .defer("node_run__output", "node_run__state")
        .order_by("created_at", "id")[:50]
    )
    running = list(
        runs_seen(user)
        .filter(status__in=[Run.Status.PENDING, Run.Status.RUNNING])
        .select_related("recipe", "started_by")
        .order_by("-id")[:20]
    )
    return gates, needs_a_person(user), running


def inbox(user=None) -> dict:
    """The inbox of `user`: only the runs (and their gates, counts) they may see."""
    gates, attention, running = attention_candidates(user)
    stopped = [run for run in attention if run.status == Run.Status.BUDGET_EXCEEDED]
    with_progress(running + stopped, gates)
    ranked = ranked_attention(gates, attention, running)
    finished = list(
        # Served by the partial index run_finished_recent (the same condition and order).
        runs_seen(user)
        .filter(status__in=sorted(Run.TERMINAL))
        .select_related("recipe", "started_by")
        .order_by("-finished_at", "-id")[:15]
    )
    status_counts, runs_total = shown_status_counts(user)
    for gate in gates:  # its accept key, only where the person operates
        gate.may_operate = user is None or user.has_perm("runs.operate_run", gate.run)
    return {
        "gates": gates,
        "running": running,
        "finished": finished,
        "status_counts": status_counts,
        "runs_total": runs_total,
        "attention": attention,
        "ranked": ranked,
        # Something waits for a decision or a person (not only runs running).
        "waiting_for_you": any(item.kind != RUNNING for item in ranked),
    }


def with_progress(runs: list[Run], gates: list[Gate]) -> None:
    """What the inbox shows of each run's progress (console/_inbox_progress.html): its loops
    (`loop_rows`) with a sparkline each, and its budget's limits; a loop gate's sparkline.
    A fixed number of queries for all of them."""
    from runs import budget, chart

    loops_by_run = defaultdict(list)
    for row in (
        NodeRun.objects.filter(run__in=[run.pk for run in runs], iteration=0)
        .filter(inbox_loop_rows())
        .defer("output", "state")
        .order_by("id")
    ):
        loops_by_run[row.run_id].append(row)
    loop_rows = [row for rows in loops_by_run.values() for row in rows]
    gate_rows = [gate.node_run for gate in gates if gate.kind == Gate.Kind.LOOP]
    lines = chart.sparklines(loop_rows + gate_rows)
    for gate in gates:
        gate.sparkline = lines.get(gate.node_run_id)
    for run in runs:
        run.loop_rows = loops_by_run[run.pk]
        run.iteration_word = kind_context(run).get("iteration_word", "iteration")
        for row in run.loop_rows:
            row.sparkline = lines.get(row.pk)
    budget.attach_limits(runs)


def inbox_loop_rows() -> Q:
    """The node rows the inbox shows as a running run's loops: what each kind counts as one
    (`LoopKind.loop_rows`: a workflow's loops and loop_groups, ...)."""
    rows = Q(pk__in=[])
    for kind, own in kinds.each("loop_rows"):
        rows |= Q(run__recipe__kind=kind.name) & own
    return rows


def waiting_for_a_person() -> Q:
    """The runs that wait for a person besides a gate: a run stopped by its budget (the
    kernel's own stop) and what a kind says (`LoopKind.needs_a_person`: a step machine
    stopped blocked or needs_human, its review request to merge)."""
    wanted = Q(status=Run.Status.BUDGET_EXCEEDED)
    for kind, runs in kinds.each("needs_a_person"):
        wanted |= Q(recipe__kind=kind.name) & runs
    return wanted


def needs_a_person(user=None) -> list[Run]:
    """The runs `waiting_for_a_person` (of those `user` may see; None: all), each with what
    to offer there (`person_action`: `budget_action` for a budget stop, else its kind's).
    The inbox lists them beside the gates."""
    found = list(
        runs_seen(user)
        .filter(waiting_for_a_person())
        .select_related("recipe", "started_by")
        .order_by("-id")[:20]
    )
    for run in found:
        if run.status == Run.Status.BUDGET_EXCEEDED:
            run.person_action = budget_action(run)
        else:
            run.person_action = kinds.of_run(run).person_action(run)
    return found


def budget_action(run: Run) -> tuple[str, str]:
    """What a person does with a run its budget stopped, as its page offers it: raise the
    limit it reached and resume (the Budget card, runs/_budget.html), or cancel it (the
    header). The link opens the page at the Budget card."""
    return "Raise the budget", reverse("run_detail", args=[run.pk]) + "#run-budget"


def needs_a_person_now(run: Run) -> str | None:
    """Why `run` waits for a person now, in a few words, or None: the inbox's rule for one
    run (a gate waiting for a decision, or `waiting_for_a_person`), and a run paused without
    a gate (a decision recorded for later, a kind's stop)."""
    gate = run.gates.filter(status=Gate.Status.PENDING).order_by("id").first()
    if gate is not None:
        return f"the gate at {gate.node_id} waits for a decision"
    if run.status == Run.Status.BUDGET_EXCEEDED:
        return run.error or run.status_meaning
    if run.status == Run.Status.PAUSED:
        return run.status_meaning
    if Run.objects.filter(waiting_for_a_person(), pk=run.pk).exists():
        return run.status_meaning
    return None


# --- what needs attention first: the inbox's order (docs/console.md) ------------------------

# Why an item stands where it does, most urgent first: a gate's deadline, the run's burn
# rate, a loop about to plateau, and then how long it has waited.
DEADLINE, BURN_RATE, PLATEAU, WAITING = "deadline", "burn_rate", "plateau", "waiting"
TIERS = (DEADLINE, BURN_RATE, PLATEAU, WAITING)
# What an item is: a pending gate, a run waiting for a person, a run pending or running.
GATE, NEEDS_PERSON, RUNNING = "gate", "needs_person", "running"
ITEM_KINDS = (GATE, NEEDS_PERSON, RUNNING)
UNDER_A_MINUTE = timedelta(minutes=1)


@dataclass
class Attention:
    """One thing the inbox asks a person to look at: a pending gate, a run waiting for a
    person (`needs_a_person`) or a run pending or running. `since` is when it began waiting
    (the gate opened, the run stopped) or running; `tier` and `reason` say why it stands
    where it does (`reason` is what its row shows)."""

    kind: str
    run: Run
    since: datetime
    gate: Gate | None = None
    # The run's cost per minute since it started (None: it reported no cost).
    burn: Decimal | None = None
    # The loop whose plateau rule one more flat iteration fires: (node id, its `then`).
    plateau: tuple[str, str] | None = None
    # What its iteration waiting for its provider says (`waiting_words`), if one waits.
    provider_wait: str = ""
    tier: str = WAITING
    reason: str = ""
    rank: int = 0

    def sort_key(self) -> tuple:
        first = 0.0
        if self.tier == DEADLINE:
            first = self.gate.deadline_at.timestamp()
        elif self.tier == BURN_RATE:
            first = -float(self.burn)
        gate = self.gate.pk if self.gate else 0
        kind = ITEM_KINDS.index(self.kind)
        return (TIERS.index(self.tier), first, self.since, kind, gate, self.run.pk)

    @property
    def overdue_by(self) -> str:
        """An overdue gate's reason after its first word ("by 3 minutes"), which its row
        shows as a badge; "" for any other item."""
        head, _, rest = self.reason.partition(" ")
        return rest if self.tier == DEADLINE and head == "overdue" else ""

    @property
    def path(self) -> str:
        """Where a person acts on it: the gate's page, the run's offered action
        (`person_action`), or the run's page."""
        if self.gate is not None:
            return reverse("gate_detail", args=[self.run.pk, self.gate.pk])
        action = getattr(self.run, "person_action", None)
        return action[1] if action else reverse("run_detail", args=[self.run.pk])

    def as_dict(self) -> dict:
        """The item as GET /api/inbox and the MCP tool `inbox` give it (JSON-ready)."""
        gate, run = self.gate, self.run
        return {
            "rank": self.rank,
            "kind": self.kind,
            "why": self.tier,
            "reason": self.reason,
            "run": run.pk,
            "recipe": run.recipe.slug,
            "status": run.status_word,
            "starter": run.starter,
            "gate": gate.pk if gate else None,
            "gate_kind": gate.kind if gate else None,
            "node": gate.node_id if gate else (self.plateau[0] if self.plateau else None),
            "iteration": gate.iteration_number if gate else None,
            "deadline_at": _iso(gate.deadline_at if gate else None),
            "burn_usd_per_minute": round(float(self.burn), 6) if self.burn else None,
            "since": _iso(self.since),
            "path": self.path,
        }


def ranked_attention(
    gates: list[Gate] | None = None,
    waiting: list[Run] | None = None,
    running: list[Run] | None = None,
    now: datetime | None = None,
    *,
    user=None,
) -> list[Attention]:
    """What needs attention, most urgent first: the one ranking the inbox, GET /api/inbox
    and the MCP tool `inbox` show (docs/console.md, "What needs attention: the inbox's
    order"). The items: the pending gates, the runs waiting for a person, the runs pending
    or running (`attention_candidates`, loaded when not given). Their order:

    1. gates with a deadline, the soonest (the most overdue) first;
    2. then by burn rate, highest first: the run's cost per minute since it started
       (`burn_rates`); a run that reports no cost counts 0 and goes on to 3 and 4;
    3. then running runs whose loop's plateau stop rule one more flat iteration fires
       (`plateaus_near`);
    4. then the rest;
    the longest waiting (or running) first within 2, 3 and 4; a running run waiting for its
    provider's limits says so as its reason. Four queries at most. Loaded here, the items
    are of the runs `user` may see (None: of every run); given, they are the caller's."""
    if gates is None:
        gates, waiting, running = attention_candidates(user)
    now = now or timezone.now()
    items = [Attention(GATE, gate.run, gate.created_at, gate=gate) for gate in gates]
    # A run stops (budget_exceeded, a kind's phase) with `set_status`, which stamps it.
    items += [Attention(NEEDS_PERSON, run, run.updated_at) for run in waiting]
    listed = {run.pk for run in waiting}
    items += [
        Attention(RUNNING, run, run.started_at or run.created_at)
        for run in running
        if run.pk not in listed
    ]
    rates = burn_rates([item.run for item in items], now)
    near = plateaus_near([item.run for item in items if item.kind == RUNNING])
    waits = waiting_words([item.run for item in items if item.kind == RUNNING])
    for item in items:
        item.burn = rates.get(item.run.pk)
        item.plateau = near.get(item.run.pk)
        item.provider_wait = waits.get(item.run.pk, "")
        item.tier, item.reason = _why(item, now)
    items.sort(key=Attention.sort_key)
    for rank, item in enumerate(items, 1):
        item.rank = rank
    return items


def _why(item: Attention, now: datetime) -> tuple[str, str]:
    """The item's tier and its reason in the words its row shows."""
    deadline = item.gate.deadline_at if item.gate else None
    if deadline is not None:
        if deadline <= now:
            return DEADLINE, f"overdue by {_span(deadline, now)}"
        return DEADLINE, f"deadline in {_span(now, deadline)}"
    if item.burn:
        # A run at work is burning money; one that waits has spent at that rate so far.
        verb = "burning" if item.kind == RUNNING else "spent"
        return BURN_RATE, f"{verb} {_dollars(item.burn)} a minute"
    if item.plateau:
        node, then = item.plateau
        does = "opens its gate" if then == THEN_GATE else "ends the loop"
        return PLATEAU, f"plateau at {node}: one more flat iteration {does}"
    if item.provider_wait:
        return WAITING, item.provider_wait
    if item.kind != RUNNING:
        doing = "waiting"
    else:
        doing = "queued" if item.run.status == Run.Status.PENDING else "running"
    return WAITING, f"{doing} {_span(item.since, now)}"


def burn_rates(runs: list[Run], now: datetime) -> dict[int, Decimal]:
    """Each run's cost per minute since it started (waiting included), from what its own
    work cost (`usage_totals`, as its budget counts it: one grouped query for all). A run
    that reports no cost is left out: it counts 0. A run younger than a minute is counted
    over one, so its first call does not read as a fortune a minute."""
    from runs import budget

    unique = {run.pk: run for run in runs}
    if not unique:
        return {}
    rates = {}
    for pk, totals in budget.usage_totals(list(unique), own_only=True).items():
        if not totals["cost_usd"]:
            continue
        run = unique[pk]
        seconds = Decimal((now - (run.started_at or run.created_at)).total_seconds())
        rates[pk] = Decimal(totals["cost_usd"]) / max(Decimal(1), seconds / 60)
    return rates


def waiting_words(runs: list[Run]) -> dict[int, str]:
    """Per running run, what its first iteration waiting for its provider says ("waiting
    for provider X (3 ahead)"): one query."""
    waits: dict[int, str] = {}
    ids = [run.pk for run in runs]
    if not ids:
        return waits
    for it in Iteration.objects.filter(run_id__in=ids).waiting_for_a_provider():
        waits.setdefault(it.run_id, it.waiting_words)
    return waits


def plateaus_near(runs: list[Run]) -> dict[int, tuple[str, str]]:
    """The running runs one of whose loops is one flat iteration from its plateau stop rule
    (`plateau_near` on the row's `state["stop"]["plateau"]` and its scores in order): per
    run, the first such loop's node id and what the rule then does. Two queries: the
    unfinished rows with a plateau rule, and their latest scores (`_latest_scores`)."""
    ids = [run.pk for run in runs if run.status == Run.Status.RUNNING]
    if not ids:
        return {}
    rows = {}
    for row in (
        NodeRun.objects.filter(run_id__in=ids, state__stop__has_key="plateau")
        .exclude(status__in=NodeRun.TERMINAL)
        .order_by("id")
        .values("id", "run_id", "node_id", "generation", "state__stop")
    ):
        rule = _plateau_rule(row["state__stop"])
        if rule is not None:
            rows[row["id"]] = (row, rule)
    scores = _latest_scores(rows)
    near: dict[int, tuple[str, str]] = {}
    for pk, (row, rule) in rows.items():
        if row["run_id"] not in near and plateau_near(rule, scores.get(pk, [])):
            near[row["run_id"]] = (row["node_id"], rule.then)
    return near


def _plateau_rule(stored) -> Plateau | None:
    """The plateau rule of a row's stored stop rules, if they read as rules (the inbox
    never fails on a row's state)."""
    try:
        return rules_from(stored).plateau
    except (TypeError, ValueError, AttributeError):
        return None


def _latest_scores(rows: dict) -> dict[int, list[Point]]:
    """Each row's scores in order, as much as its plateau rule reads: its latest
    `iterations` + 1 scores, the oldest of them standing for all before it (it carries the
    best score so far, all the rule compares the window with). One query whatever the
    length of the loops."""
    if not rows:
        return {}
    reach = max(rule.iterations for _, rule in rows.values()) + 1
    current = Q(pk__in=[])
    for pk, (row, _) in rows.items():
        current |= Q(node_run_id=pk, generation=row["generation"])
    per_row = [F("node_run_id")]
    found = (
        Iteration.objects.filter(current, score__isnull=False)
        .annotate(
            best=Window(Max("score"), partition_by=per_row, order_by=F("number").asc()),
            latest=Window(RowNumber(), partition_by=per_row, order_by=F("number").desc()),
        )
        .filter(latest__lte=reach)
        .order_by("node_run_id", "number")
        .values_list("node_run_id", "number", "score", "best")
    )
    points: dict[int, list[Point]] = defaultdict(list)
    for pk, number, score, best in found:
        points[pk].append(Point(number, best if not points[pk] else score))
    return points


def _span(start: datetime, end: datetime) -> str:
    """A duration as the inbox says it, its largest unit only: "3 minutes", "2 hours"."""
    if end - start < UNDER_A_MINUTE:
        return "under a minute"
    return timesince(start, end, depth=1).replace("\xa0", " ")


def _dollars(rate: Decimal) -> str:
    if rate >= Decimal("0.01"):
        return f"${rate:.2f}"
    if rate >= Decimal("0.0001"):
        return f"${rate:.4f}"
    return "under $0.0001"


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
