"""Read-side queries for the inbox, the console's home page (refreshed live).

Bounded like runs.queries: a fixed number of queries whatever the size of the tables, and
counts capped instead of counting every run.
"""

from __future__ import annotations

from collections import defaultdict

from django.db import connection
from django.db.models import Q

from runs.models import Gate, NodeRun, Run

# The inbox refreshes live: counting a status stops here ("1000+"), so a refresh reads at
# most this many index entries per status however many runs the table holds.
STATUS_COUNT_CAP = 1000


def capped_status_counts() -> list[tuple[str, str]]:
    """(status, shown count) for every run status, in one query bounded by the cap."""
    table = Run._meta.db_table
    selects, params = [], []
    for status in Run.Status.values:
        selects.append(
            f"SELECT %s, (SELECT COUNT(*) FROM (SELECT 1 FROM {table} WHERE status = %s "
            "LIMIT %s) AS capped)"
        )
        params += [status, status, STATUS_COUNT_CAP + 1]
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(selects), params)
        counts = dict(cursor.fetchall())
    return [
        (
            status,
            f"{STATUS_COUNT_CAP}+" if counts[status] > STATUS_COUNT_CAP else str(counts[status]),
        )
        for status in Run.Status.values
    ]


def inbox() -> dict:
    gates = list(
        Gate.objects.filter(status=Gate.Status.PENDING)
        .select_related("run__recipe", "iteration", "node_run")
        .defer("node_run__output", "node_run__state")
        .order_by("created_at", "id")[:50]
    )
    from runs import budget, chart

    running = list(
        Run.objects.filter(
            status__in=[
                Run.Status.PENDING,
                Run.Status.RUNNING,
                Run.Status.OBSERVING,
                Run.Status.VERIFYING,
                Run.Status.BUDGET_EXCEEDED,
            ]
        )
        .select_related("recipe", "started_by")
        .order_by("-id")[:20]
    )
    loops_by_run = defaultdict(list)
    for row in (
        NodeRun.objects.filter(run__in=[run.pk for run in running], iteration=0)
        .filter(  # a Python loop's agents count as loops; a pipeline's single calls do not,
            # except a driven loop's steps; a step machine's sessions (their turns) do too
            Q(kind__in=["loop", "loop_group", "session"])
            | Q(kind="agent", max_iterations__isnull=False)
            | Q(kind="agent", run__recipe__kind="driven")
        )
        .defer("output", "state")
        .order_by("id")
    ):
        loops_by_run[row.run_id].append(row)
    loop_rows = [row for rows in loops_by_run.values() for row in rows]
    gate_rows = [gate.node_run for gate in gates if gate.kind == Gate.Kind.LOOP]
    lines = chart.sparklines(loop_rows + gate_rows)
    for gate in gates:
        gate.sparkline = lines.get(gate.node_run_id)
    for run in running:
        run.loop_rows = loops_by_run[run.pk]
        for row in run.loop_rows:
            row.sparkline = lines.get(row.pk)
    budget.attach_limits(running)
    finished = list(
        # Served by the partial index run_finished_recent (the same condition and order).
        Run.objects.filter(status__in=sorted(Run.TERMINAL))
        .select_related("recipe", "started_by")
        .order_by("-finished_at", "-id")[:15]
    )
    status_counts = capped_status_counts()
    return {
        "gates": gates,
        "running": running,
        "finished": finished,
        "status_counts": status_counts,
        "attention": needs_a_person(),
    }


def needs_a_person() -> list[Run]:
    """Runs stopped for a person (blocked, needs_human) and approved runs whose review
    request waits to be merged: the inbox lists them beside the gates."""
    stopped = Run.objects.filter(status__in=Run.NEEDS_PERSON)
    to_merge = Run.objects.filter(review__status="open")
    return list((stopped | to_merge).select_related("recipe", "review").order_by("-id")[:20])
