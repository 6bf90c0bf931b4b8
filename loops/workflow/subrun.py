"""`workflow:` nodes: another recipe run as child runs, one, or one per `fan_out` item.

The node starts its children through `services.start_run` and then waits holding no worker
and no lease. Each child that ends sends its parent an `advance_run` (Run.set_status), and
the scheduler calls `advance_waiting` here under the parent's lock: start the next children the
window (`max_parallel`) allows, and once every child has ended, reduce their outcomes by
the join rule into the node's output and status. The sweep re-sends that message if it
was lost (sweep.waiting_parents, the workflow's sweep pass). Children are ordinary runs: their gates are in the inbox.
"""

from __future__ import annotations

import json

from django.db import transaction

from runs import outputs
from runs.actor import Actor
from runs.engine.variables import VariableError, render_value, substitute
from runs.errors import ServiceError
from runs.executor.context import build_context, run_dirs
from runs.executor.spec import SpecError, node_spec, spec_for
from runs.executor.state import lock_run
from runs.models import NodeRun, Run

MAX_DEPTH = 5
FAILED_MARK = "archon_failed"  # the peer's marker for a failed child's slot, kept for its files


class SubrunError(Exception):
    pass


def start_children(run: Run, spec, node, row: NodeRun) -> None:
    with transaction.atomic():
        run = lock_run(run.pk)
        row.refresh_from_db()
        if run.is_terminal or row.status != NodeRun.Status.RUNNING:
            return
        try:
            items = _items(run, spec, node, row)
            target = _target(run, node)
        except (SubrunError, VariableError) as exc:
            row.fail(run, str(exc))
            return
        row.lease_expires_at = None  # waits for its children, not for a worker
        row.max_iterations = None
        row.state = {**row.state, "items": items, "target": target.slug, "seen": 0}
        row.save(update_fields=["lease_expires_at", "max_iterations", "state"])
        _redrive_unfinished(run, row)
        advance(run, spec, node, row)


def _items(run, spec, node, row) -> list:
    """One child per item of the fan_out list, or one child (item None)."""
    if node.fan_out is None:
        return [None]
    if isinstance(node.fan_out.items, list):  # written in the recipe, checked at load
        return list(node.fan_out.items)
    text = substitute(node.fan_out.items, build_context(run, spec, row)).strip()
    try:
        items = json.loads(text)
    except ValueError:
        items = None
    if not isinstance(items, list):
        shown = text if len(text) <= 80 else text[:77] + "..."
        raise SubrunError(
            f"fan_out.items ({node.fan_out.items}) must be a JSON list, not {shown!r}"
        )
    return items


def _target(run: Run, node):
    from recipes.models import Recipe

    name = node.workflow.strip()
    recipe = Recipe.objects.filter(slug=name).first()
    if recipe is None:
        named = list(Recipe.objects.filter(name=name)[:2])
        recipe = named[0] if len(named) == 1 else None
    if recipe is None:
        raise SubrunError(f"no recipe named {name!r} to start as a child run")
    ancestors, depth, current = {run.recipe_id}, 0, run
    while current.parent_id is not None:
        current = Run.objects.only("recipe_id", "parent_id").get(pk=current.parent_id)
        ancestors.add(current.recipe_id)
        depth += 1
    if recipe.pk in ancestors:
        raise SubrunError(f"workflow {name!r} is this run's own recipe or one that started it")
    if depth + 1 >= MAX_DEPTH:
        raise SubrunError(f"child runs nest at most {MAX_DEPTH} deep")
    return recipe


def children(row: NodeRun) -> dict[int, Run]:
    """The latest child run of each item index."""
    latest: dict[int, Run] = {}
    for child in Run.objects.filter(parent_node=row).order_by("child_index", "id"):
        latest[child.child_index or 0] = child
    return latest


def _redrive_unfinished(run: Run, row: NodeRun) -> None:
    """On a resumed parent: children that completed keep their result, failed and cancelled
    ones are resumed in place."""
    from runs import services
    from runs.actor import ENGINE

    for child in children(row).values():
        if child.status in (Run.Status.FAILED, Run.Status.CANCELLED):
            try:
                services.resume_run(child, ENGINE)
            except ServiceError:
                continue
            run.append_event("child_run_resumed", row.node_id, child=child.pk)


def advance_waiting(run: Run, spec) -> None:
    """Under the run's lock, as the scheduler advances it: each `workflow:` node that waits
    for its children goes on (`advance`)."""
    for waiting in NodeRun.objects.filter(
        run=run, iteration=0, kind=NodeRun.Kind.WORKFLOW, status=NodeRun.Status.RUNNING
    ):
        advance(run, spec, node_spec(spec, waiting.node_id), waiting)


def advance(run: Run, spec, node, row: NodeRun) -> None:
    """Under the parent's lock: start what the window allows; join when all have ended."""
    items = row.state.get("items")
    if items is None or row.status != NodeRun.Status.RUNNING:
        return
    latest = children(row)
    ended = {i: c for i, c in latest.items() if c.is_terminal}
    for index, child in sorted(ended.items()):
        if child.pk not in row.state.get("reported", []):
            row.state.setdefault("reported", []).append(child.pk)
            run.append_event(
                "child_run_finished",
                row.node_id,
                child=child.pk,
                index=index,
                status=child.status_word,
            )
    row.state["seen"] = len(ended)
    window = node.fan_out.max_parallel if node.fan_out else 1
    active = len(latest) - len(ended)
    for index, item in enumerate(items):
        if active >= window:
            break
        if index not in latest:
            try:
                latest[index] = _spawn(run, spec, node, row, index, item)
            except (_ChildRefused, VariableError) as exc:
                row.save(update_fields=["state"])
                row.fail(run, f"could not start the child run for item {index}: {exc}")
                return
            active += 1
    row.save(update_fields=["state"])
    if len(ended) == len(items) and row.status == NodeRun.Status.RUNNING:
        _join(run, node, row, [latest[i] for i in range(len(items))])


def _spawn(run: Run, spec, node, row: NodeRun, index: int, item) -> Run | None:
    from recipes.models import Recipe
    from runs import services

    ctx = build_context(run, spec, row)
    if node.fan_out is not None:
        message = render_value(item)
    elif node.input is not None:
        message = substitute(node.input, ctx)
    else:
        message = run.message
    inputs = {
        k: substitute(v, ctx) if isinstance(v, str) else v for k, v in node.child_inputs.items()
    }
    if node.fan_out is not None and node.fan_out.item_input:
        inputs[node.fan_out.item_input] = item
    recipe = Recipe.objects.get(slug=row.state["target"])
    try:
        child = services.start_run(
            recipe,
            Actor("engine", label=f"node {row.node_id} of run {run.pk}"),
            message=message,
            inputs=inputs,
            workdir=str(run_dirs(run)[0]),
            lineage=services.Lineage(parent_node=row, child_index=index),
        )
    except ServiceError as exc:
        raise _ChildRefused(str(exc)) from None
    run.append_event("child_run_started", row.node_id, child=child.pk, index=index)
    return child


class _ChildRefused(Exception):
    pass


def result_of(child: Run):
    """A completed child's result: its `returns:` node's output (JSON stays JSON)."""
    try:
        child_spec = spec_for(child)
    except SpecError:
        return child.error
    node_id = child_spec.result_node() if hasattr(child_spec, "result_node") else "workflow"
    last = (
        NodeRun.objects.filter(run=child, node_id=node_id, iteration=0)
        .order_by("-generation")
        .first()
    )
    if last is None:
        return ""
    return last.structured if last.structured is not None else last.output


def _join(run: Run, node, row: NodeRun, ended: list[Run]) -> None:
    failed = [c for c in ended if c.status != Run.Status.COMPLETED]
    if node.fan_out is None:
        child = ended[0]
        if failed:
            row.fail(run, f"child run {child.pk} {child.status}: {child.error or 'no reason'}")
            return
        value = result_of(child)
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        row.complete(run, text, None if isinstance(value, str) else value, children=[child.pk])
        return
    results = [
        result_of(c)
        if c.status == Run.Status.COMPLETED
        else {FAILED_MARK: True, "error": c.error, "status": c.status}
        for c in ended
    ]
    # The children's answers together may pass the cap: the row keeps the end of the list
    # and the file all of it, like any output.
    text = json.dumps(results, ensure_ascii=False)
    output, kept = outputs.keep_text(run.pk, f"node-{row.pk}-{row.attempts}", text)
    summary = {"children": [c.pk for c in ended], "failed": len(failed)}
    if failed and node.fan_out.join == "all_success":
        first = failed[0]
        row.fail(
            run,
            f"{len(failed)} of {len(ended)} child runs did not complete (join all_success); "
            f"first: run {first.pk} (item {first.child_index}) {first.status}: "
            f"{first.error or 'no reason'}",
            columns={"output": output, "structured": results, **kept},
            **summary,
        )
        return
    row.complete(run, output, results, columns=kept, **summary)


__all__ = ["advance", "advance_waiting", "children", "result_of", "start_children"]
