"""Walk a run's DAG: decide which nodes start, skip or wait, layer by layer.

`advance_run` is idempotent: it reads what the database says and acts on it, so it can be
delivered twice, or triggered by the sweep, without doing anything twice.
"""

from __future__ import annotations

import logging

from django.db import transaction

from runs import kinds
from runs.engine.conditions import ConditionError, evaluate, parse_condition
from runs.engine.dag import trigger_decision
from runs.engine.variables import VariableError, substitute
from runs.models import NodeRun, Run

from .context import build_context
from .spec import SpecError, scope_layers, scope_nodes, spec_for
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
        kinds.of_run(run).advance_within(run, spec)  # a workflow's loop_group bodies, children
        run.update_status(finished=process_scope(run, spec, None))


def _scope_rows(run: Run, within: NodeRun | None) -> dict[str, NodeRun]:
    if within is None:
        rows = NodeRun.objects.filter(run=run, iteration=0).order_by("generation")
    else:
        rows = NodeRun.objects.filter(
            run=run,
            iteration=within.iteration_count,
            generation=within.generation,
            node_id__startswith=within.node_id + ".",
        )
    return {row.node_id: row for row in rows}


def process_scope(run: Run, spec, within: NodeRun | None) -> bool:
    """Start what is ready in the first unfinished layer of the run's graph, or of the body
    of the node `within` (a workflow's loop_group, at its current iteration). True when
    every node of it is terminal."""
    scope_id = within.node_id if within else None
    prefix = f"{scope_id}." if scope_id else ""
    nodes = {n.id: n for n in scope_nodes(spec, scope_id)}
    rows = _scope_rows(run, within)
    for layer in scope_layers(spec, scope_id):
        layer_done = True
        for short_id in layer:
            node = nodes[short_id]
            row = rows.get(prefix + short_id)
            if row is None:
                row = NodeRun.objects.create(
                    run=run,
                    node_id=prefix + short_id,
                    kind=node.kind,
                    iteration=within.iteration_count if within else 0,
                    generation=within.generation if within else 0,
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
