"""Forking a workflow's `loop` (iteration k+1 in its threaded session, with new feedback
or a new prompt) and `loop_group` (its next body iteration, with the body's sessions as
they were): the workflow's `LoopKind.continuations` (runs.fork makes the new run and
copies what had finished)."""

from __future__ import annotations

from runs.errors import Conflict, InputError
from runs.fork import (
    Continuation,
    ForkPoint,
    advance_fork,
    continue_node,
    copy_history,
    copy_iterations,
    copy_nodes,
    start_fork,
)
from runs.models import Iteration, NodeRun, Run

from . import group as group_exec


def _check_workflow(point: ForkPoint) -> None:
    if "." in point.row.node_id:
        raise Conflict(
            f"'{point.row.node_id}' runs inside a loop_group: fork from the group's "
            "iteration instead."
        )


def _check_group(point: ForkPoint) -> None:
    _check_workflow(point)
    if point.prompt:
        raise InputError(
            {"prompt": "a loop_group has no prompt of its own; give feedback to steer it"}
        )


def _carry_loop(new: Run, point: ForkPoint, counts: dict) -> None:
    state = {"session_id": point.it.session_id or point.row.state.get("session_id")}
    if point.prompt:  # the template for the rest of the loop ($LOOP_USER_INPUT etc. apply)
        state["prompt_template"] = point.prompt
    copy = continue_node(new, point, **state)
    counts["iterations"] = copy_history(new, point, copy)
    start_fork(new)
    copy.start_iteration(
        new, point.number + 1, feedback=point.feedback, after_gate=bool(point.feedback)
    )
    advance_fork(new)


def _carry_group(new: Run, point: ForkPoint, counts: dict) -> None:
    group = point.row
    body = NodeRun.objects.filter(
        run=point.old,
        node_id__startswith=group.node_id + ".",
        generation=group.generation,
        iteration__lte=point.number,
    ).order_by("iteration", "id")
    sessions = dict(group.state.get("sessions") or {})
    for row in body:  # the sessions as they were after iteration k
        if (row.state or {}).get("session_id"):
            sessions[row.node_id.split(".", 1)[1]] = row.state["session_id"]
    copy = continue_node(new, point, sessions=sessions, phase="body")
    body_map = copy_nodes(new, body)
    calls = Iteration.objects.filter(node_run_id__in=list(body_map)).order_by("id")
    copy_iterations(new, calls, body_map)  # the body steps' agent calls
    counts["iterations"] = copy_history(new, point, copy)
    start_fork(new)
    group_exec.begin_next(
        new, copy, point.number + 1, feedback=point.feedback, after_gate=bool(point.feedback)
    )
    advance_fork(new)


CONTINUATIONS = {
    NodeRun.Kind.LOOP: Continuation(_check_workflow, _carry_loop, edits_prompt=True),
    NodeRun.Kind.LOOP_GROUP: Continuation(_check_group, _carry_group),
}
