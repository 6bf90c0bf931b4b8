"""Read-side queries for loops: the API, the /loops pages and the run page's loop panel.

Each runs a fixed number of queries whatever the number of loops, iterations or steps (the
steps of every iteration shown are read in one query), and pages with keysets on ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Q
from django.db.models.functions import Length, Right

from console.projects import visible
from runs.models import Iteration
from runs.queries import take_page, with_output_ends

from .models import Loop, LoopIteration

LOOPS_PAGE = 50
# A run page shows the loops of its run, newest last, up to this many (older ones are on
# /loops?session=<run>), each with its latest iterations (all of them on the loop's page).
RUN_LOOPS_SHOWN = 10
RUN_LOOP_ITERATIONS_SHOWN = 20
# A loop's page shows its history this many iterations at a time (the API gives it whole).
LOOP_PAGE_ITERATIONS = 100
STEP_OUTPUT_SHOWN = 20_000


@dataclass
class Step:
    agent: str
    attempt: int
    iteration: Iteration | None


@dataclass
class IterationView:
    row: LoopIteration
    steps: list[Step] = field(default_factory=list)


@dataclass
class LoopView:
    loop: Loop
    iterations: list[IterationView] = field(default_factory=list)

    @property
    def first_shown(self) -> int:
        return self.iterations[0].row.number if self.iterations else 0

    @property
    def last_shown(self) -> int:
        return self.iterations[-1].row.number if self.iterations else 0


def loop_page(*, session=None, agent=None, status=None, before=None, limit=LOOPS_PAGE, user=None):
    """One page of loops, newest first, and the id to continue from (None at the end): of
    the runs `user` may see (None: of every run)."""
    loops = Loop.objects.select_related("run__recipe").order_by("-id")
    if user is not None:
        loops = visible(loops, user, "runs.view_run", "run__project")
    if session:
        loops = loops.filter(run_id=session)
    if agent:
        loops = loops.filter(agent=agent)
    if status:
        loops = loops.filter(status=status)
    if before:
        loops = loops.filter(pk__lt=before)
    page, more = take_page(loops, limit)
    return page, (page[-1].pk if more else None)


def loop_detail(loop_id: int, *, first: int | None = None, count: int | None = None) -> LoopView:
    """A loop with its iterations: all of them, or `count` from number `first` on."""
    loop = Loop.objects.select_related("run__recipe", "host_iteration").get(pk=loop_id)
    if first is None:
        return _with_iterations([loop])[0]
    last = first + (count or LOOP_PAGE_ITERATIONS) - 1
    return _with_iterations([loop], lambda _: Q(number__gte=first, number__lte=last))[0]


def run_loops(run) -> tuple[list[LoopView], int]:
    """The latest loops of a run (oldest of them first), each with its latest iterations,
    and whether earlier loops came before them."""
    newest = list(Loop.objects.filter(run=run).order_by("-id")[: RUN_LOOPS_SHOWN + 1])
    earlier = len(newest) > RUN_LOOPS_SHOWN
    shown = list(reversed(newest[:RUN_LOOPS_SHOWN]))
    views = _with_iterations(shown, _latest_iterations)
    return views, (shown[0].pk if earlier and shown else 0)


def _latest_iterations(loop: Loop) -> Q:
    return Q(number__gt=loop.iteration_count - RUN_LOOP_ITERATIONS_SHOWN)


def _with_iterations(loops: list[Loop], which=None) -> list[LoopView]:
    """Each loop with its iterations (those `which(loop)` selects) and their steps."""
    views = {loop.pk: LoopView(loop) for loop in loops}
    wanted_rows = Q(pk__in=[])
    for loop in loops:
        wanted_rows |= Q(loop_id=loop.pk) & (which(loop) if which else Q())
    rows = LoopIteration.objects.filter(wanted_rows).order_by("loop_id", "number")
    wanted: set[int] = set()
    iterations = []
    for row in rows:
        iterations.append(row)
        wanted |= {step["iteration"] for step in row.steps or []}
    found = {
        it.pk: it
        for it in Iteration.objects.filter(pk__in=wanted)
        .defer("output", "raw_output")
        .annotate(
            output_length=Length("output"),
            output_tail=Right("output", STEP_OUTPUT_SHOWN),
            raw_length=Length("raw_output"),
            raw_tail=Right("raw_output", STEP_OUTPUT_SHOWN),
        )
    }
    for row in iterations:
        steps = [
            Step(step["agent"], step.get("attempt", 1), found.get(step["iteration"]))
            for step in row.steps or []
        ]
        views[row.loop_id].iterations.append(IterationView(row, steps))
    return [views[loop.pk] for loop in loops]


def run_panel(run) -> dict:
    """What the run page shows of a driven run: its latest loops, and the host's turn."""
    views, earlier = run_loops(run)
    host = (
        with_output_ends(
            Iteration.objects.filter(run=run, node_run__kind="driven", node_run__iteration=0)
        )
        .select_related("node_run")
        .order_by("-id")
        .first()
    )
    return {"loop_views": views, "earlier_loops": earlier, "host_turn": host}
