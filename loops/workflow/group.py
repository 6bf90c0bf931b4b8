"""`loop_group` nodes: a sealed body of nodes re-run in full each iteration.

The kernel's scheduler runs the body's layers (rows `group.node` with the group's
iteration) when `advance_bodies` asks it to; when every body node is terminal it enqueues
`finish_group_iteration` (tasks.py), which checks completion here (until_bash runs outside
any transaction) and then settles like a loop iteration.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import transaction

from console.redact import plain_cause
from runs import dispatch
from runs.engine.completion import detect_signal
from runs.engine.dag import layers
from runs.engine.variables import VariableError
from runs.executor.context import build_context, step_sandbox
from runs.executor.scheduler import process_scope
from runs.executor.spec import node_spec, spec_for
from runs.executor.state import lock_run
from runs.executor.stream import OutputStream
from runs.models import Iteration, NodeRun, Run

from .loop import open_loop, settle_loop, until_bash_met
from .spec import FINISH_GROUP_TASK

log = logging.getLogger(__name__)


def start_group(run: Run, spec, node, row: NodeRun) -> None:
    open_loop(run, row, node.loop_group.max_iterations, {"phase": "body", "sessions": {}})


def advance_bodies(run: Run, spec) -> None:
    """Under the run's lock, as the scheduler advances it: start what is ready in each
    running group's body; a body that has ended has its completion checked. A group claimed
    but not started yet (`start_group` sets its phase with its first round) has no body to
    run: walking it then would make body rows of a round 0 and run them."""
    for group in NodeRun.objects.filter(
        run=run, iteration=0, kind=NodeRun.Kind.LOOP_GROUP, status=NodeRun.Status.RUNNING
    ):
        phase = group.state.get("phase")
        if phase not in ("body", "checking"):
            continue
        if process_scope(run, spec, group):
            # Sent again while "checking" in case its message was lost (the sweep
            # advances stalled runs); the check's own claim makes a duplicate harmless.
            if phase == "body":
                group.state["phase"] = "checking"
                group.save(update_fields=["state"])
            dispatch.send_on_commit(FINISH_GROUP_TASK, group.pk, group.iteration_count)


def begin_next(run: Run, row: NodeRun, number: int, *, feedback: str = "", after_gate=False):
    """The group's next iteration, its body to run (None: it did not start)."""
    body = {"state": {**row.state, "phase": "body"}}
    return row.start_iteration(run, number, feedback=feedback, after_gate=after_gate, columns=body)


def remember_session(row: NodeRun, session_id: str) -> None:
    """Keep a body AI node's session so the next iteration can resume it."""
    group_id, body_id = row.node_id.split(".", 1)
    group = NodeRun.objects.select_for_update().get(
        run_id=row.run_id, node_id=group_id, iteration=0
    )
    sessions = dict(group.state.get("sessions") or {})
    sessions[body_id] = session_id
    group.state = {**group.state, "sessions": sessions}
    group.save(update_fields=["state"])


def terminal_body_id(group_spec) -> str:
    """The body node nothing else depends on (the last declared, if several)."""
    depended = {dep for n in group_spec.nodes for dep in n.depends_on}
    ends = [n.id for n in group_spec.nodes if n.id not in depended]
    order = [
        node_id
        for layer in layers({n.id: n.depends_on for n in group_spec.nodes})
        for node_id in layer
    ]
    return max(ends, key=order.index) if ends else group_spec.nodes[-1].id


def finish_iteration(group_row_id: int, number: int) -> None:
    group = NodeRun.objects.select_related("run__recipe_version", "run__recipe").get(
        pk=group_row_id
    )
    it = Iteration.objects.filter(
        node_run=group, generation=group.generation, number=number
    ).first()
    if it is None:
        return
    # Claim the check: a duplicate delivery finds the lease taken and does nothing.
    if not it.claim_check():
        return
    run = group.run
    spec = spec_for(run)
    group_spec = spec.node(group.node_id).loop_group
    body = _Body.of(group, number, terminal_body_id(group_spec))
    fired, error = [], None
    if body.failed is None:
        fired, error = _fired(it, spec, group, group_spec, body)
    with transaction.atomic():
        run = lock_run(run.pk)
        group.refresh_from_db()
        if run.is_terminal or group.status != NodeRun.Status.RUNNING:
            return
        if body.failed is not None or error:
            error = error or f"body node '{body.failed.node_id}' failed: {body.failed.error}"
            if it.fail(run, error):
                group.fail(run, error)
            return
        _complete(run, group, group_spec, it, body, fired)


@dataclass(frozen=True)
class _Body:
    """The body's rows of one group iteration (by their id in the body), the first that
    failed, and the last step's (`terminal`), whose output is the iteration's."""

    rows: dict[str, NodeRun]
    failed: NodeRun | None
    terminal: NodeRun | None

    @classmethod
    def of(cls, group: NodeRun, number: int, terminal_id: str) -> _Body:
        prefix = group.node_id + "."
        rows = {
            r.node_id.removeprefix(prefix): r
            for r in NodeRun.objects.filter(
                run=group.run,
                iteration=number,
                generation=group.generation,
                node_id__startswith=prefix,
            )
        }
        failed = next((r for r in rows.values() if r.status == NodeRun.Status.FAILED), None)
        return cls(rows, failed, rows.get(terminal_id))

    @property
    def done(self) -> bool:
        return self.terminal is not None and self.terminal.status == NodeRun.Status.COMPLETED

    @property
    def output(self) -> str:
        return self.terminal.output if self.done else ""

    @property
    def raw(self) -> str:
        return (self.terminal.state.get("raw") if self.terminal else None) or self.output

    @property
    def kept(self) -> dict:
        """The file of the iteration's full output: its last body step's."""
        return {
            "output_file": self.terminal.output_file if self.done else "",
            "output_bytes": self.terminal.output_bytes if self.done else None,
        }


def _fired(it: Iteration, spec, group: NodeRun, group_spec, body: _Body):
    """The group's completion conditions the iteration met (`until_bash` only if `until`
    did not), and the error of an `until_bash` that could not run."""
    run = group.run
    fired: list[str] = []
    if group_spec.until and detect_signal(body.raw, group_spec.until):
        fired.append("until")
    if group_spec.until_bash and not fired:
        try:
            ctx = build_context(run, spec, body.terminal or group)
            stream = OutputStream(Iteration, it.pk, it.attempts, run.pk)
            sandbox = step_sandbox(run, spec, node_spec(spec, group.node_id))
            if until_bash_met(group_spec.until_bash, ctx, run, stream, sandbox):
                fired.append("until_bash")
        except VariableError as exc:
            return fired, f"until_bash: {exc}"
        except Exception as exc:  # reported on the node
            log.exception("until_bash of %s crashed", group.node_id)
            return fired, f"until_bash: {plain_cause(exc)} (details in the worker's log)"
    return fired, None


def _complete(run: Run, group: NodeRun, group_spec, it: Iteration, body: _Body, fired) -> None:
    """The iteration ended well: complete it with its body's output, and let the loop rule
    decide (complete, gate, fail or go on). Its usage is its body steps' own iterations'
    (steps.py), not counted again here."""
    terminal, kept = body.terminal, body.kept
    if not it.complete(
        run,
        output=body.output,
        raw_output=body.raw,
        structured=terminal.structured if terminal else None,
        channels=fired,
        **kept,
    ):
        return
    columns = {"output": body.output, "structured": it.structured, **kept}
    settle_loop(run, group, group_spec, it, fired, columns)
    if group.status == NodeRun.Status.RUNNING and group.iteration_count > it.number:
        group.state = {**group.state, "phase": "body"}
        group.save(update_fields=["state"])


__all__ = ["start_group", "advance_bodies", "finish_iteration", "begin_next", "remember_session"]
