"""Walk a run's DAG: decide which nodes start, skip or wait, layer by layer.

`advance_run` is idempotent: it reads what the database says and acts on it, so it can be
delivered twice, or triggered by the sweep, without doing anything twice.
"""

from __future__ import annotations

import logging

from django.db import transaction

from runs import dispatch
from runs.engine.conditions import ConditionError, evaluate, parse_condition
from runs.engine.dag import trigger_decision
from runs.engine.variables import VariableError, substitute
from runs.models import NodeRun, Run

from . import subrun
from .context import build_context
from .spec import SpecError, node_spec, scope_layers, scope_nodes, spec_for
from .state import lock_run

log = logging.getLogger(__name__)


def advance_run(run_id: int) -> None:
    with transaction.atomic():
        run = lock_run(run_id)
        if run is None or run.is_terminal or run.status == Run.Status.BUDGET_EXCEEDED:
            return  # a budget stop starts nothing new until it is resumed
        try:
            spec = spec_for(run)
        except SpecError as exc:
            run.fail(f"recipe version does not load: {exc}")
            return
        run.start()
        for group in NodeRun.objects.filter(
            run=run, iteration=0, kind="loop_group", status=NodeRun.Status.RUNNING
        ):
            phase = group.state.get("phase")
            if _process_scope(run, spec, group) and phase in ("body", "checking"):
                # Sent again while "checking" in case its message was lost (the sweep
                # advances stalled runs); the check's own claim makes a duplicate harmless.
                if phase == "body":
                    group.state["phase"] = "checking"
                    group.save(update_fields=["state"])
                dispatch.send_on_commit("finish_group_iteration", group.pk, group.iteration_count)
        for waiting in NodeRun.objects.filter(
            run=run, iteration=0, kind="workflow", status=NodeRun.Status.RUNNING
        ):
            subrun.advance(run, spec, node_spec(spec, waiting.node_id), waiting)
        run.update_status(finished=_process_scope(run, spec, None))


def _scope_rows(run: Run, group: NodeRun | None) -> dict[str, NodeRun]:
    if group is None:
        rows = NodeRun.objects.filter(run=run, iteration=0).order_by("generation")
    else:
        rows = NodeRun.objects.filter(
            run=run,
            iteration=group.iteration_count,
            generation=group.generation,
            node_id__startswith=group.node_id + ".",
        )
    return {row.node_id: row for row in rows}


def _process_scope(run: Run, spec, group: NodeRun | None) -> bool:
    """Start what is ready in the first unfinished layer. True when every node is terminal."""
    group_id = group.node_id if group else None
    prefix = f"{group_id}." if group_id else ""
    nodes = {n.id: n for n in scope_nodes(spec, group_id)}
    rows = _scope_rows(run, group)
    for layer in scope_layers(spec, group_id):
        layer_done = True
        for short_id in layer:
            node = nodes[short_id]
            row = rows.get(prefix + short_id)
            if row is None:
                row = NodeRun.objects.create(
                    run=run,
                    node_id=prefix + short_id,
                    kind=node.kind,
                    iteration=group.iteration_count if group else 0,
                    generation=group.generation if group else 0,
                )
                rows[row.node_id] = row
            if row.status == NodeRun.Status.PENDING and row.queued_at is None:
                _decide(run, spec, node, row, [rows[prefix + d] for d in node.depends_on])
            if not row.is_terminal:
                layer_done = False
        if not layer_done:
            return False
    return True


def _decide(run: Run, spec, node, row: NodeRun, deps: list[NodeRun]) -> None:
    verdict = trigger_decision(node.trigger_rule, [d.status for d in deps])
    if verdict == "wait":
        return
    if verdict == "skip":
        upstream = ", ".join(f"{d.short_id} {d.status}" for d in deps)
        row.skip(run, f"trigger rule {node.trigger_rule} not met ({upstream})")
        return
    if node.when:
        try:
            ctx = build_context(run, spec, row)

            def resolve(node_id, field, loop_prev):
                ref = f"${'LOOP_PREV.' if loop_prev else ''}{node_id}.output"
                return substitute(ref + (f".{field}" if field else ""), ctx)

            met = evaluate(parse_condition(node.when), resolve)
        except (ConditionError, VariableError) as exc:
            row.fail(run, f"when: {exc}")
            return
        if not met:
            row.skip(run, f"when condition is false: {node.when}")
            return
    row.queue(run)
