"""Read-side queries for the inbox, the console's home page (refreshed live).

Bounded like runs.queries: a fixed number of queries whatever the size of the tables, and
counts capped instead of counting every run.
"""

from __future__ import annotations

from collections import defaultdict

from django.db import connection
from django.db.models import Q

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
            status__in=[Run.Status.PENDING, Run.Status.RUNNING, Run.Status.BUDGET_EXCEEDED]
        )
        .select_related("recipe", "started_by")
        .order_by("-id")[:20]
    )
    loops_by_run = defaultdict(list)
    for row in (
        NodeRun.objects.filter(run__in=[run.pk for run in running], iteration=0)
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
    for run in running:
        run.loop_rows = loops_by_run[run.pk]
        run.iteration_word = kind_context(run).get("iteration_word", "iteration")
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


def inbox_loop_rows() -> Q:
    """The node rows the inbox shows as a running run's loops: what each kind counts as one
    (`LoopKind.loop_rows`: a workflow's loops and loop_groups, ...)."""
    rows = Q(pk__in=[])
    for kind, own in kinds.each("loop_rows"):
        rows |= Q(run__recipe__kind=kind.name) & own
    return rows


def needs_a_person() -> list[Run]:
    """The runs a kind says wait for a person besides a gate (`LoopKind.needs_a_person`: a
    step machine stopped blocked or needs_human, its review request to merge), each with
    what to offer there (`person_action`): the inbox lists them beside the gates."""
    asked = [Q(recipe__kind=kind.name) & runs for kind, runs in kinds.each("needs_a_person")]
    if not asked:
        return []
    wanted = asked[0]
    for more in asked[1:]:
        wanted |= more
    found = list(Run.objects.filter(wanted).select_related("recipe").order_by("-id")[:20])
    for run in found:
        run.person_action = kinds.of_run(run).person_action(run)
    return found
