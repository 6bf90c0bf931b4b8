"""Read-side queries for the inbox, the console's home page (refreshed live).

Bounded like runs.queries: a fixed number of queries whatever the size of the tables, and
counts capped instead of counting every run.
"""

from __future__ import annotations

from collections import defaultdict

from django.db import connection
from django.db.models import Q
from django.urls import reverse

from runs import kinds
from runs.models import Gate, NodeRun, Run
from runs.queries import kind_context

# The inbox refreshes live: counting a status stops here ("1000+"), so a refresh reads at
# most this many index entries per status however many runs the table holds.
STATUS_COUNT_CAP = 1000


def capped_status_counts() -> list[tuple[str, str]]:
    """(status, shown count) for every status a run shows (`Run.status_words`: the kernel's
    and each kind's phases), in one query bounded by the cap."""
    words = Run.status_words()
    selects, params = [], []
    for word in words:
        capped = Run.objects.filter(Run.showing(word)).order_by().values_list("pk")
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


def shown_status_counts() -> tuple[list[tuple[str, str]], str]:
    """The inbox's chips: the statuses some run shows (a chip per status no run has would
    fill a phone's screen), and the total of all of them, "N+" when a count was capped."""
    counts = capped_status_counts()
    total = sum(int(count.rstrip("+")) for _, count in counts)
    capped = any(count.endswith("+") for _, count in counts)
    return [(word, count) for word, count in counts if count != "0"], f"{total}{'+' * capped}"


def inbox() -> dict:
    gates = list(
        Gate.objects.filter(status=Gate.Status.PENDING)
        .select_related("run__recipe", "run__started_by", "iteration", "node_run")
        .defer("node_run__output", "node_run__state")
        .order_by("created_at", "id")[:50]
    )
    # A run stopped by its budget is not running: it waits for a person (`needs_a_person`).
    running = list(
        Run.objects.filter(status__in=[Run.Status.PENDING, Run.Status.RUNNING])
        .select_related("recipe", "started_by")
        .order_by("-id")[:20]
    )
    attention = needs_a_person()
    stopped = [run for run in attention if run.status == Run.Status.BUDGET_EXCEEDED]
    with_progress(running + stopped, gates)
    finished = list(
        # Served by the partial index run_finished_recent (the same condition and order).
        Run.objects.filter(status__in=sorted(Run.TERMINAL))
        .select_related("recipe", "started_by")
        .order_by("-finished_at", "-id")[:15]
    )
    status_counts, runs_total = shown_status_counts()
    return {
        "gates": gates,
        "running": running,
        "finished": finished,
        "status_counts": status_counts,
        "runs_total": runs_total,
        "attention": attention,
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


def needs_a_person() -> list[Run]:
    """The runs `waiting_for_a_person`, each with what to offer there (`person_action`:
    `budget_action` for a budget stop, else its kind's). The inbox lists them beside the
    gates."""
    found = list(
        Run.objects.filter(waiting_for_a_person())
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
