"""Forking a driven loop: a new run of the same recipe version that holds copies of the
host's turns, the pipeline's steps and the loops up to the fork point, and goes on from there.

What the card a person clicks stands for:
- a pipeline step (an iteration of an agent's row: `researcher`, `drafter`, ...) stands for
  the loop iteration it belongs to, the whole pipeline pass: the fork point is the end of
  loop iteration k. The new run holds the steps and loops up to that moment and its open
  loop at k; its host node then begins a new turn that first runs iteration k+1 itself, as
  if the host had called core_iterate_loop(feedback) right after iteration k (input
  {previousOutput, feedback}; without feedback the output goes in as it is), then gives the
  host that output to judge as usual (iterate or finish);
- a host turn that finished stands for everything that turn did: the new run holds it (and
  every turn, loop and step before it) and the host begins its next turn, told the feedback.

The host's conversation is not resumed: a provider's session after iteration k already holds
what came after it. The new turn is fresh and its prompt says what happened (the loop, the
iteration the fork ran, its output). Only the fork's own work runs: copies are marked
`carried_from`, never executed again. An edited prompt is refused (give feedback instead).
"""

from __future__ import annotations

from django.db.models import Q

from runs.errors import Conflict, InputError
from runs.models import Iteration, NodeRun

from .models import Loop, LoopIteration
from .prompts import render_value
from .spec import PIPELINE_STEP

FORK = "fork"  # the host row's state: where the fork goes on, consumed by its first turn
FINISHED = (Iteration.Status.COMPLETED, Iteration.Status.TIMED_OUT, Iteration.Status.FAILED)


def loop_iteration_of(point) -> LoopIteration | None:
    """The loop iteration a pipeline step belongs to (any of its attempts)."""
    pk = point.it.pk
    for it in LoopIteration.objects.filter(loop__run=point.old).select_related("loop"):
        if any(step.get("iteration") == pk for step in it.steps or []):
            return it
    return None


def check(point) -> None:
    if point.prompt:
        raise InputError(
            {
                "prompt": "a driven loop is forked with feedback only; its agents keep their "
                "instructions"
            }
        )
    if point.row.kind == "driven":
        return  # a finished host turn: its node begins the next turn
    it = loop_iteration_of(point)
    if it is None:
        raise Conflict(
            f"Iteration {point.number} of '{point.row.node_id}' is not a step of any loop "
            "iteration: fork from a pipeline step or a host turn."
        )
    if it.status not in (LoopIteration.Status.COMPLETED, LoopIteration.Status.RECOVERED):
        raise Conflict(
            f"Loop {it.loop_id}'s iteration {it.number} {it.status}: fork from a loop "
            "iteration that finished with an output."
        )
    if it.number >= it.loop.max_iterations:
        raise Conflict(
            f"Iteration {it.number} is the last loop {it.loop_id} may run (max_iterations "
            f"{it.loop.max_iterations}): there is no next iteration to fork into."
        )


def carry(new, point, counts: dict) -> None:
    from runs import dispatch

    if point.row.kind == "driven":
        loop_it, cutoff, host = None, point.it.finished_at, point.row
        going_on = {"feedback": point.feedback, "after_turn": point.number}
    else:
        loop_it = loop_iteration_of(point)
        cutoff, turn = loop_it.finished_at, loop_it.loop.host_iteration
        host = turn.node_run if turn else NodeRun.objects.get(run=point.old, kind="driven")
        going_on = {"feedback": point.feedback, "iteration": loop_it.number}
    copies = _carry_rows(new, point, host, cutoff, going_on)
    loop_map = _carry_loops(new, point, cutoff, copies, loop_it)
    if loop_it is not None:
        going_on["loop"] = loop_map[loop_it.loop_id].pk
        NodeRun.objects.filter(run=new, carried_from=host).update(state={FORK: going_on})
    counts["iterations"] = len(copies)
    dispatch.send_on_commit("advance_run", new.pk)  # the scheduler queues the host's node


def _carry_rows(new, point, host: NodeRun, cutoff, going_on: dict) -> dict[int, Iteration]:
    """The host's row (pending: its node starts again, with the fork's memory) and the
    agents' rows, with every iteration that had finished by the fork point (the turn still
    at work then is not one of them). Returns old iteration id -> copy."""
    from runs.fork import copy_iterations, copy_nodes

    latest: dict[str, NodeRun] = {}
    for row in NodeRun.objects.filter(run=point.old, kind=PIPELINE_STEP, iteration=0).order_by(
        "generation"
    ):
        latest[row.node_id] = row
    # Agents' rows the shared helper carried already (they had finished before the point).
    already = set(
        NodeRun.objects.filter(run=new, carried_from__in=list(latest.values())).values_list(
            "carried_from_id", flat=True
        )
    )
    wanted = [host, *(row for row in latest.values() if row.pk not in already)]
    finished = Q()
    for row in wanted:
        finished |= Q(node_run_id=row.pk, generation=row.generation)
    its = list(
        Iteration.objects.filter(finished, status__in=FINISHED, finished_at__lte=cutoff).order_by(
            "id"
        )
    )
    used = {it.node_run_id for it in its}
    turns = [it.number for it in its if it.node_run_id == host.pk]
    rows = copy_nodes(
        new,
        [host],
        status=NodeRun.Status.PENDING,
        output="",
        structured=None,
        error="",
        attempts=0,
        iteration_count=max(turns, default=0),
        state={FORK: going_on},
        queued_at=None,
        started_at=None,
        finished_at=None,
    )
    agents = [row for row in wanted[1:] if row.pk in used]
    rows.update(copy_nodes(new, agents, status=NodeRun.Status.COMPLETED, finished_at=cutoff))
    return copy_iterations(new, its, rows)


def _carry_loops(new, point, cutoff, copies: dict, loop_it: LoopIteration | None) -> dict:
    """The loops started by the fork point, their iterations up to it (the forked loop open
    at iteration k), with their crumbs, so /loops and the live stream show the history."""
    loop_map: dict[int, Loop] = {}
    for loop in Loop.objects.filter(run=point.old, started_at__lte=cutoff).order_by("id"):
        going_on = loop_it is not None and loop.pk == loop_it.loop_id
        its = list(loop.iterations.filter(finished_at__lte=cutoff).order_by("number"))
        if going_on:
            its = [it for it in its if it.number <= loop_it.number]
        copy = _copy_loop(new, loop, its, going_on, copies)
        loop_map[loop.pk] = copy
        _copy_loop_iterations(new, copy, its, copies)
        if not going_on:
            crumb = {"loopId": copy.pk, "status": copy.status, "iterations": copy.iteration_count}
            if copy.result is not None:
                crumb["result"] = copy.result
            new.append_event("loop:end", copy.agent, **crumb)
    return loop_map


def _copy_loop(new, loop: Loop, its: list, going_on: bool, copies: dict) -> Loop:
    """`loop` in the new run, logged as started: as it ended, or, the one the fork goes on
    with (`going_on`), open after `its`."""
    copy = Loop.objects.create(
        run=new,
        # None for the turn the fork replaces (set by its next).
        host_iteration=copies.get(loop.host_iteration_id),
        agent=loop.agent,
        pipeline=loop.pipeline,
        input=loop.input,
        max_iterations=loop.max_iterations,
        status=Loop.Status.OPEN if going_on else loop.status,
        iteration_count=len(its) if going_on else loop.iteration_count,
        last_output=_shown(its[-1]) if going_on and its else loop.last_output,
        result=None if going_on else loop.result,
        error="" if going_on else loop.error,
        # The loop that goes on is the fork's own from now: its start and duration are
        # the fork's (a carried loop that had ended keeps its history's).
        started_at=new.created_at if going_on else loop.started_at,
        finished_at=None if going_on else loop.finished_at,
    )
    new.append_event(
        "loop:start",
        copy.agent,
        loopId=copy.pk,
        pipeline=list(copy.pipeline),
        maxIterations=copy.max_iterations,
    )
    return copy


# What a carried loop iteration keeps of the original, as it was.
_KEPT = (
    "number",
    "status",
    "input",
    "feedback",
    "output",
    "shown_output",
    "replaced",
    "error",
    "attempts",
    "started_at",
    "finished_at",
    "duration_ms",
)


def _copy_loop_iterations(new, copy: Loop, its: list, copies: dict) -> None:
    """The loop's iterations `its` under `copy`, each logged (its start and its end), their
    steps pointing at the copied agents' iterations."""
    for it in its:
        steps = [
            {**step, "iteration": copies[step["iteration"]].pk}
            for step in it.steps
            if step.get("iteration") in copies
        ]
        LoopIteration.objects.create(loop=copy, **{f: getattr(it, f) for f in _KEPT}, steps=steps)
        new.append_event("loop:iteration:start", copy.agent, loopId=copy.pk, iteration=it.number)
        new.append_event(
            "loop:iteration:end",
            copy.agent,
            loopId=copy.pk,
            iteration=it.number,
            output=it.output,
        )


def _shown(it: LoopIteration):
    return it.shown_output if it.replaced else it.output


# --- the host's first turn after the fork (loops.driven.runner) ----------------------------------


def pending(row: NodeRun) -> dict | None:
    return (row.state or {}).get(FORK)


def go_on(driver, row: NodeRun, turn: Iteration) -> str:
    """Where the fork goes on, once, at the start of the host's new turn: the forked loop is
    this turn's, and its next iteration runs with the fork's feedback. Returns what the host
    is told (added to its prompt)."""
    from runs.agent_tools import ToolError

    fork = pending(row)
    state = {k: v for k, v in (row.state or {}).items() if k != FORK}
    # Consumed now: a worker lost from here on begins a plain new turn, as without a fork.
    NodeRun.objects.filter(pk=row.pk).update(state=state)
    row.state = state
    feedback = fork.get("feedback") or ""
    if not fork.get("loop"):
        told = f"This run was forked from another after your turn {fork.get('after_turn')}"
        if feedback:
            return told + f". A person's feedback on that turn:\n{feedback}"
        return told + "; go on from there."
    loop = Loop.objects.filter(pk=fork["loop"], status=Loop.Status.OPEN).first()
    if loop is None:
        return ""
    Loop.objects.filter(run=row.run_id, host_iteration__isnull=True).update(host_iteration=turn)
    told = (
        f"This run was forked from another after iteration {fork['iteration']} of your loop "
        f"{loop.pk} (pipeline: {' → '.join(loop.pipeline)}); that loop is still open. "
    )
    if feedback:
        told += f"Iteration {fork['iteration'] + 1} ran with this feedback:\n{feedback}\n"
    else:
        told += f"Iteration {fork['iteration'] + 1} ran on the last output as it was.\n"
    try:
        with driver.lock:
            done = driver.iterate({"feedback": feedback} if feedback else {})
    except ToolError as exc:
        return told + f"It did not finish: {exc}\n"
    return (
        told
        + f"Its output (iteration {done['iteration']} of at most {done['maxIterations']}):\n"
        + render_value(done["output"])
        + "\nJudge it: do not start a new loop; iterate this one with feedback or finish it."
    )
