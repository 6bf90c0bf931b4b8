"""Read-side queries for the console's pages.

Every function here runs a fixed number of queries whatever the size of a run (a run with
1,000 iterations costs the same first screen as a run with one) and pages with keysets on
ids, never with OFFSET or a COUNT(*) of a big table.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection, transaction
from django.db.models import Count, Exists, Min, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Left, Length, Right
from django.utils import timezone

from console.projects import projects_where
from recipes.models import Recipe
from runs import kinds
from runs.models import Gate, Iteration, NodeRun, Run, RunEvent
from runs.models.gate import COMMENT_LIMIT

TIMELINE_PAGE = 20
# A run page shows this many top-level nodes, and the end of each node's output: a recipe
# with hundreds of nodes of long output must not make a page of a hundred megabytes.
NODES_PAGE = 50
NODE_OUTPUT_SHOWN = 20_000
RUN_LIST_PAGE = 50
EVENTS_PAGE = 200
# Body steps of this many latest iterations of a loop_group are on the page (all of them
# in any real recipe); older ones are listed by the API (/api/runs/<id>/steps).
GROUP_ITERATIONS_SHOWN = 100
DIFF_LINE_LIMIT = 400
DIFF_INPUT_LIMIT = 200_000


@contextmanager
def one_snapshot():
    """Reads that must agree with each other (a run's status and its pending gate): one
    transaction that sees a single committed state, so a poller never reads "running"
    beside the gate that paused the run."""
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if outermost and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


# --- paging --------------------------------------------------------------------------------


def take_page(rows, size: int) -> tuple[list, bool]:
    """The first `size` rows of a keyset-ordered queryset, and whether more follow (one
    query, one extra row, never a COUNT)."""
    page = list(rows[: size + 1])
    return page[:size], len(page) > size


# --- run list ------------------------------------------------------------------------------


def run_list(
    user,
    *,
    status: str = "",
    recipe: str = "",
    project: str = "",
    search: str = "",
    before: int | None = None,
):
    """One page of the runs `user` may see, newest first, and the id to continue from
    (None on the last page)."""
    runs = (
        Run.objects.visible_to(user)
        .select_related("recipe", "recipe_version", "started_by", "project")
        .order_by("-id")
    )
    if project:
        runs = runs.filter(project__slug=project)
    if status:
        runs = runs.filter(Run.showing(status))  # a kernel status, or a kind's phase
    if recipe:
        runs = runs.filter(recipe__slug=recipe)
    if search:
        runs = runs.filter(message__icontains=search)
    if before:
        runs = runs.filter(pk__lt=before)
    page, more = take_page(runs, RUN_LIST_PAGE)
    _attach_usage(page)
    return page, (page[-1].pk if more else None)


def _attach_usage(page: list[Run]) -> None:
    """Tokens and cost of each run on a page of the list (one grouped query for the page)."""
    found = {
        row["run_id"]: row
        for row in Iteration.objects.filter(run_id__in=[run.pk for run in page])
        .values("run_id")
        .annotate(
            sum_in=Sum("tokens_in"),
            sum_out=Sum("tokens_out"),
            sum_cost=Sum("cost_usd"),
            unpriced=Count("id", filter=Q(tokens_in__isnull=False, cost_usd__isnull=True)),
        )
        .order_by()
    }
    for run in page:
        row = found.get(run.pk, {})
        run.tokens_total = (
            (row.get("sum_in") or 0) + (row.get("sum_out") or 0)
            if row.get("sum_in") is not None
            else None
        )
        run.cost_total = row.get("sum_cost")
        run.cost_partial = bool(row.get("unpriced")) and run.cost_total is not None


def recipe_choices(user) -> list[tuple[str, str]]:
    """The recipes the runs list filters by: those `user` may see."""
    return list(Recipe.objects.visible_to(user).order_by("slug").values_list("slug", "name"))


def project_choices(user) -> list[tuple[str, str]]:
    """The projects whose runs `user` may see, as (slug, name)."""
    return list(projects_where(user, "runs.view_run").values_list("slug", "name"))


# --- run page ------------------------------------------------------------------------------


def get_run(run_id: int, user) -> Run:
    """The run, if `user` may see it; else Run.DoesNotExist, as for an id no run has."""
    return (
        Run.objects.visible_to(user)
        .select_related(
            "recipe__current_version",
            "recipe_version",
            "started_by",
            "rerun_of",
            "parent_node",
            "project",
        )
        .get(pk=run_id)
    )


def seen_runs(user, ids) -> set[int]:
    """Which of the runs `ids` `user` may see (one query; none for no ids): the run page
    links its parent, the run it re-ran, its forks and its children only then."""
    wanted = {pk for pk in ids if pk}
    if not wanted:
        return set()
    return set(Run.objects.visible_to(user).filter(pk__in=wanted).values_list("pk", flat=True))


@dataclass
class NodeRow:
    """A top-level node, and for a loop_group the body rows of every iteration; its status
    and its time as the Nodes card shows them (`shown_nodes`)."""

    row: NodeRun
    group_iterations: list[tuple[int, list[NodeRun]]] = field(default_factory=list)
    older_iterations: int = 0
    children: list[Run] = field(default_factory=list)  # a workflow node's child runs
    status: str = ""
    started_at: datetime | None = None
    ended_at: datetime | None = None

    @property
    def duration(self):
        if self.started_at is None:
            return None
        return (self.ended_at or timezone.now()) - self.started_at

    @property
    def ticking(self) -> bool:
        """Still counting: the page's clock moves it between refreshes (console-clock.js)."""
        return self.status == NodeRun.Status.RUNNING and self.ended_at is None


def recipe_name(run: Run) -> str:
    """The recipe's name as the version the run used says it: a later version may rename
    the recipe, and the run is still the old version's."""
    if run.recipe_version_id == run.recipe.current_version_id:
        return run.recipe.name
    from recipes.validation import spec_name
    from runs.executor.spec import SpecError, spec_for

    try:
        return spec_name(spec_for(run), run.recipe.slug)
    except SpecError:  # a version that no longer loads: the recipe's name is all there is
        return run.recipe.name


def with_call_times(rows):
    """Node rows with their calls' times: `newest_call_status` / `newest_call_finished_at`
    (their newest iteration's), and `own_started_at`, when the first of the calls made in
    this run started (a fork's carried rows also hold copies of the original's calls)."""
    calls = Iteration.objects.filter(node_run=OuterRef("pk")).order_by("-id")
    own = Iteration.objects.filter(node_run=OuterRef("pk"), carried_from__isnull=True)
    return rows.annotate(
        newest_call_status=Subquery(calls.values("status")[:1]),
        newest_call_finished_at=Subquery(calls.values("finished_at")[:1]),
        own_started_at=Subquery(
            own.order_by().values("node_run").annotate(first=Min("started_at")).values("first")[:1]
        ),
    )


def shown_nodes(run: Run, rows: list[NodeRun]) -> list[NodeRow]:
    """Each row with the status and the time the Nodes card shows (rows `with_call_times`).

    A row whose work is its agent's calls, outside the recipe's graph and with no loop of
    its own (a driven pipeline's step, a Python script's agent), stays running between its
    calls: its newest call says what it does, as the loop card, which shows those calls,
    says it. A row a fork carried keeps the original's start; when it works again in the
    fork, its time here starts with its first call here. A row its first call made, never
    claimed, is timed from that call to its newest one's end."""
    outside = kinds.of_run(run).rows_outside_graph
    shown = []
    for row in rows:
        status, started, ended = row.status, row.started_at, row.finished_at
        between_calls = (
            status == NodeRun.Status.RUNNING
            and row.kind in outside
            and not row.max_iterations
            and row.newest_call_status not in (None, Iteration.Status.RUNNING)
        )
        if between_calls:
            status, ended = row.newest_call_status, row.newest_call_finished_at
        carried = row.carried_from_id and started and started < run.created_at
        if carried and row.own_started_at is not None:
            started = row.own_started_at
        if started is None and row.own_started_at is not None:
            # Made by its first call, never claimed (a Python loop's agent): its calls time it.
            started = row.own_started_at
            if status != NodeRun.Status.RUNNING:
                ended = row.newest_call_finished_at or ended
        shown.append(NodeRow(row, status=status, started_at=started, ended_at=ended))
    return shown


def with_usage(rows):
    """Node rows with what their iterations (every agent call is one) add up to:
    `used_in`, `used_out`, `used_cost` (None when none reported it)."""

    def spent(column: str) -> Subquery:
        calls = Iteration.objects.filter(node_run=OuterRef("pk")).order_by().values("node_run")
        return Subquery(calls.annotate(total=Sum(column)).values("total")[:1])

    return rows.annotate(
        used_in=spent("tokens_in"), used_out=spent("tokens_out"), used_cost=spent("cost_usd")
    )


def _with_output_tail(rows):
    """Rows without their full output: its length and its last NODE_OUTPUT_SHOWN chars."""
    return rows.defer("output", "stderr").annotate(
        output_length=Length("output"),
        output_tail=Right("output", NODE_OUTPUT_SHOWN),
        stderr_tail=Right("stderr", NODE_OUTPUT_SHOWN),
    )


def with_output_ends(iterations):
    """Iterations without their outputs: each text's length and its last NODE_OUTPUT_SHOWN
    characters (`raw_length`, `raw_tail`, `output_length`, `output_tail`)."""
    return iterations.defer("output", "raw_output").annotate(
        raw_length=Length("raw_output"),
        raw_tail=Right("raw_output", NODE_OUTPUT_SHOWN),
        output_length=Length("output"),
        output_tail=Right("output", NODE_OUTPUT_SHOWN),
    )


def nodes(run: Run, *, after: int | None = None, user=None) -> dict:
    """A page of the run's top-level nodes in order, from the one after id ``after``; a
    workflow node's child runs those `user` may see (every one for None)."""
    rows = with_call_times(with_usage(_with_output_tail(run.nodes.filter(iteration=0))))
    rows = rows.order_by("id")
    if after:
        rows = rows.filter(pk__gt=after)
    page, more = take_page(rows, NODES_PAGE)
    top = shown_nodes(run, page)
    groups = [n for n in top if n.row.kind == NodeRun.Kind.LOOP_GROUP and n.row.iteration_count]
    if groups:
        wanted = Q()
        for group in groups:
            first = max(1, group.row.iteration_count - GROUP_ITERATIONS_SHOWN + 1)
            group.older_iterations = first - 1
            wanted |= Q(
                node_id__startswith=group.row.node_id + ".",
                generation=group.row.generation,
                iteration__gte=first,
            )
        body = defaultdict(lambda: defaultdict(list))
        body_rows = with_usage(_with_output_tail(run.nodes.filter(wanted)))
        for row in body_rows.order_by("iteration", "id"):
            body[row.node_id.split(".", 1)[0]][row.iteration].append(row)
        for group in groups:
            per_iteration = body[group.row.node_id]
            group.group_iterations = sorted(per_iteration.items(), reverse=True)
    _attach_children([n for n in top if n.row.kind == NodeRun.Kind.WORKFLOW], user)
    return {
        "nodes": top,
        "nodes_after": after,
        "more_nodes_after": top[-1].row.pk if more else None,
    }


def _attach_children(waiting: list[NodeRow], user=None) -> None:
    """Each workflow node's child runs (the latest of each item), with a waiting gate; of
    another project than `user` may see, none (a child runs its own recipe's project)."""
    if not waiting:
        return
    by_node = {n.row.pk: n for n in waiting}
    latest: dict[tuple[int, int], Run] = {}
    children = Run.objects.visible_to(user) if user is not None else Run.objects.all()
    for child in (
        children.filter(parent_node__in=list(by_node))
        .select_related("recipe")
        .annotate(
            waiting_gate=Exists(Gate.objects.filter(run=OuterRef("pk"), status=Gate.Status.PENDING))
        )
        .order_by("child_index", "id")
    ):
        latest[(child.parent_node_id, child.child_index or 0)] = child
    for (node_pk, _), child in sorted(latest.items()):
        by_node[node_pk].children.append(child)


def gate_state(run: Run) -> dict:
    """The pending gate (if any) and the latest decided one, to say who decided what."""
    gates = list(
        run.gates.select_related("iteration", "decided_by").order_by("-created_at", "-id")[:2]
    )
    pending = next((g for g in gates if g.status == Gate.Status.PENDING), None)
    decided = next((g for g in gates if g.status != Gate.Status.PENDING), None)
    if pending is not None and decided is not None and decided.node_run_id != pending.node_run_id:
        decided = None  # another node's decision says nothing about this gate
    # Parallel branches can wait at several gates: the panel lists the others (keys j / k).
    others = (
        list(
            run.gates.filter(status=Gate.Status.PENDING)
            .exclude(pk=pending.pk)
            .select_related("iteration")
            .order_by("created_at", "id")[:20]
        )
        if pending is not None
        else []
    )
    return {
        "gate": pending,
        "other_gates": others,
        "last_decision": decided,
        "comment_limit": COMMENT_LIMIT,
        "comment_limit_text": f"{COMMENT_LIMIT:,}",
    }


def iterations(run: Run, *, before: int | None = None) -> tuple[list[Iteration], int | None]:
    """A page of the run's iterations, newest first, each with the diff against the
    previous iteration of the same node."""
    # Prefetched, not joined: the cards of one node share its row, which caches what
    # can_fork asks of it (a fork continuation's `offers`). Each card gets the ends of its
    # outputs and the start the diff compares, never a whole output (up to the cap each).
    rows = (
        with_output_ends(run.iterations.defer("prompt"))
        .annotate(
            output_head=Left("output", DIFF_INPUT_LIMIT),
            prompt_length=Length("prompt"),
            prompt_head=Left("prompt", NODE_OUTPUT_SHOWN),
        )
        .prefetch_related("node_run")
        .order_by("-id")
    )
    if before:
        rows = rows.filter(pk__lt=before)
    page, more = take_page(rows, TIMELINE_PAGE)
    _attach_previous_outputs(run, page)
    _attach_worktree_diffs(run, page)
    return page, (page[-1].pk if more else None)


def _attach_worktree_diffs(run: Run, page: list[Iteration]) -> None:
    """The git diff each iteration left in the run's worktree (one query for the page)."""
    for it in page:
        it.worktree_diff = None
    if not page:
        return
    found = RunEvent.objects.filter(
        run=run,
        kind="worktree_diff",
        step__in={it.node_id for it in page},
        data__iteration__in=sorted({it.number for it in page}),
    ).values_list("step", "data")
    # A step machine's session turns are numbered per session: their diffs name the session.
    by_key = {(step, data.get("iteration"), data.get("session")): data for step, data in found}
    for it in page:
        session = it.node_run.generation + 1
        it.worktree_diff = by_key.get((it.node_id, it.number, session)) or by_key.get(
            (it.node_id, it.number, None)
        )


def usage(run: Run, *, own_only: bool = False, with_count: bool = False) -> dict:
    """Tokens and cost of the whole run (`runs.budget.usage_totals`). `cost_partial` says that some usage had
    no known price, so the cost shown is a lower bound; `with_count` adds the number of
    iterations."""
    from runs.budget import usage_totals

    spent = usage_totals([run.pk], own_only=own_only)[run.pk]
    totals = {key: spent[key] for key in ("tokens_in", "tokens_out", "cost_usd")}
    if all(v is None for v in totals.values()) and not with_count:
        return {"usage": None}
    totals["cost_partial"] = bool(spent["unpriced"]) and totals["cost_usd"] is not None
    if with_count:
        totals["iterations"] = spent["iterations"]
    return {"usage": totals}


def _attach_previous_outputs(run: Run, page: list[Iteration]) -> None:
    key = {(it.node_run_id, it.generation, it.number): it for it in page}
    missing = [
        (it.node_run_id, it.generation, it.number - 1)
        for it in page
        if it.number > 1 and (it.node_run_id, it.generation, it.number - 1) not in key
    ]
    earlier = {}
    if missing:
        wanted = Q()
        for node_run_id, generation, number in missing:
            wanted |= Q(node_run_id=node_run_id, generation=generation, number=number)
        found = (
            run.iterations.filter(wanted)
            .annotate(head=Left("output", DIFF_INPUT_LIMIT))
            .values_list("node_run_id", "generation", "number", "head")
        )
        for node_run_id, generation, number, head in found:
            earlier[(node_run_id, generation, number)] = head
    for it in page:
        previous_key = (it.node_run_id, it.generation, it.number - 1)
        if previous_key in key:
            previous = key[previous_key].output_head
        else:
            previous = earlier.get(previous_key)
        # A failed or cancelled iteration has no answer to compare: no diff against it.
        answered = it.status in (Iteration.Status.COMPLETED, Iteration.Status.TIMED_OUT)
        it.has_previous = previous is not None and answered
        it.diff_lines = output_diff(previous, it.output_head) if it.has_previous else []


def output_diff(before: str, after: str) -> list[tuple[str, str]]:
    """(kind, line) pairs of a unified diff; kind is add, del, hunk or same."""
    lines = difflib.unified_diff(
        (before or "")[:DIFF_INPUT_LIMIT].splitlines(),
        (after or "")[:DIFF_INPUT_LIMIT].splitlines(),
        fromfile="previous",
        tofile="this iteration",
        lineterm="",
        n=2,
    )
    diff = []
    for line in lines:
        if line.startswith(("---", "+++")):
            continue
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "same")
        diff.append((kind, line))
        if len(diff) >= DIFF_LINE_LIMIT:
            diff.append(("hunk", "… (diff truncated)"))
            break
    return diff


def events(run: Run, *, before: int | None = None) -> tuple[list[RunEvent], int | None]:
    """The latest events (in order), and the seq to load earlier ones from."""
    rows = run.events.order_by("-seq")
    if before:
        rows = rows.filter(seq__lt=before)
    page, more = take_page(rows, EVENTS_PAGE)
    page.reverse()
    return page, (page[0].seq if more else None)


def run_page(run: Run, user, *, nodes_after: int | None = None) -> dict:
    timeline, older = iterations(run)
    event_rows, earlier_events = events(run)
    context = {
        "run": run,
        "recipe_name": recipe_name(run),
        **usage(run),
        **nodes(run, after=nodes_after, user=user),
        **gate_state(run),
        "iterations": timeline,
        "older": older,
        "events": event_rows,
        "earlier_events": earlier_events,
        **kind_context(run),
    }
    return context


def kind_context(run: Run) -> dict:
    """What the run's kind adds to every render of its pages (`LoopKind.run_context`): the
    words it uses for an iteration, say. Its panels bring their own (`LoopKind.run_parts`)."""
    return kinds.of_run(run).run_context(run)
