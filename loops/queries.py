"""Read-side queries for loops: the API, the /loops pages and the run page's loop panel.

Each runs a fixed number of queries whatever the number of loops, iterations or steps (the
steps of every iteration shown are read in one query), and pages with keysets on ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models.functions import Length, Right

from runs.models import Iteration
from runs.queries import take_page

from .models import Loop, LoopIteration

LOOPS_PAGE = 50
# A run page shows the loops of its run, newest last, up to this many (older ones are on
# /loops?session=<run>).
RUN_LOOPS_SHOWN = 10
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


def loop_page(*, session=None, agent=None, status=None, before=None, limit=LOOPS_PAGE):
    """One page of loops, newest first, and the id to continue from (None at the end)."""
    loops = Loop.objects.select_related("run__recipe").order_by("-id")
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


def loop_detail(loop_id: int) -> LoopView:
    loop = Loop.objects.select_related("run__recipe", "host_iteration").get(pk=loop_id)
    return _with_iterations([loop])[0]


def run_loops(run) -> tuple[list[LoopView], int]:
    """The latest loops of a run (oldest of them first), and how many more came before."""
    newest = list(Loop.objects.filter(run=run).order_by("-id")[: RUN_LOOPS_SHOWN + 1])
    earlier = len(newest) > RUN_LOOPS_SHOWN
    shown = list(reversed(newest[:RUN_LOOPS_SHOWN]))
    return _with_iterations(shown), (shown[0].pk if earlier and shown else 0)


def _with_iterations(loops: list[Loop]) -> list[LoopView]:
    views = {loop.pk: LoopView(loop) for loop in loops}
    rows = LoopIteration.objects.filter(loop__in=[loop.pk for loop in loops]).order_by(
        "loop_id", "number"
    )
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
        Iteration.objects.filter(run=run, node_run__kind="driven", node_run__iteration=0)
        .select_related("node_run")
        .order_by("-id")
        .first()
    )
    return {"loop_views": views, "earlier_loops": earlier, "host_turn": host}
