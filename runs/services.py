"""The only way in: every surface (pages, API, CLI) calls these, so a rule lives in one place.

Services validate, change state through the models inside a transaction, append events,
and enqueue work on commit. They never render anything.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from recipes.models import Recipe
from runs import dispatch, resuming
from runs.actor import Actor, can_operate
from runs.decisions import (  # noqa: F401 - the gate services, re-exported
    LAST_ITERATION,
    OTHERS_APPROVE,
    _apply,
    approve,
    check_approver,
    check_room_to_iterate,
    decide,
    gate_for_decision,
    pending_gate,
    recorded_decisions,
    reject,
)
from runs.errors import (
    AlreadyDecided,
    Conflict,
    InputError,
    NotAllowed,
    NotFound,
    ServiceError,
    StarterCannotApprove,
)
from runs.executor.spec import SpecError, snapshot_spec
from runs.executor.state import lock_run
from runs.models import NodeRun, Run

__all__ = [
    "Actor",
    "AlreadyDecided",
    "Conflict",
    "InputError",
    "NotAllowed",
    "StarterCannotApprove",
    "NotFound",
    "ServiceError",
    "can_operate",
    "require_operator",
]


def require_operator(user) -> None:
    Actor.operator(user, "console")


# --- starting runs -------------------------------------------------------------------------


def start_run(
    recipe: Recipe,
    *,
    actor: Actor | None = None,
    user=None,
    message: str = "",
    inputs: dict | None = None,
    workdir: str = "",
    version=None,
    rerun_of: Run | None = None,
    started_via: str = "",
    parent_node: NodeRun | None = None,
    child_index: int | None = None,
    budget: dict | None = None,
    budget_replaces_recipe: bool = False,
    forked: dict | None = None,
    start: bool = True,
) -> Run:
    """A new run of `recipe` started by `actor` (whose permission its edge checked:
    `Actor.operator`). `user=` is the older spelling of a console actor, checked here;
    `started_via` names a starter without a person when no actor is given. With
    `parent_node` it is a child run of that `workflow:` node, started by the engine for
    whoever started the parent. `budget` (limits as a person gave them) replaces the
    recipe's limits one by one; `forked` ({"from": run, "point": {...}}) is given by
    runs.fork only; `start=False`: a step-machine run is created and waits for its first
    tick."""
    from recipes.formats.budget import BudgetInvalid, clean_budget, merged
    from recipes.inputs import InputsInvalid, clean_inputs

    if actor is None:
        actor = Actor.operator(user, "console") if user is not None else Actor("engine")
        if user is None and started_via:
            actor = Actor("engine", label=started_via)
    if not recipe.enabled:
        raise Conflict(f"Recipe '{recipe.slug}' is disabled.")
    version = version or recipe.current_version
    if version is None or not recipe.valid and version == recipe.current_version:
        raise Conflict(f"Recipe '{recipe.slug}' has errors; fix it before starting a run.")
    spec, snapshot = _spec(recipe, version)
    try:
        spec_inputs = dict(getattr(spec, "inputs", {}) or {})
        if parent_node is not None and not spec_inputs:
            cleaned = dict(inputs or {})  # no declared inputs: a parent's values pass as given
        else:
            cleaned = clean_inputs(spec_inputs, inputs or {})
    except InputsInvalid as exc:
        raise InputError(exc.errors) from None
    # A child run is the engine's doing, on behalf of whoever started the parent.
    starter = parent_node.run.started_by if parent_node is not None else actor.person
    starter_name = parent_node.run.started_by_name if parent_node is not None else actor.name
    try:
        given = clean_budget(budget, allow_empty_values=True)
        limits = given if budget_replaces_recipe else merged(getattr(spec, "budget", None), given)
    except BudgetInvalid as exc:
        raise InputError({f"budget.{k}": v for k, v in exc.errors.items()}) from None
    step_machine = recipe.kind == Recipe.Kind.PLANEAI
    if step_machine:
        from recipes.planeai.start import check_start, default_repository

        workdir = workdir or default_repository()
        check_start(
            spec, cleaned, workdir, actor.person, message=message, child=parent_node is not None
        )
    with transaction.atomic():
        run = Run.objects.create(
            recipe=recipe,
            recipe_version=version,
            message=message,
            inputs=cleaned,
            budget=limits,
            started_by=starter,
            started_by_name=starter_name,
            rerun_of=rerun_of,
            forked_from=forked["from"] if forked else None,
            fork_point=forked["point"] if forked else {},
            snapshot=snapshot,
            workdir=workdir,
            parent=parent_node.run if parent_node is not None else None,
            parent_node=parent_node,
            child_index=child_index,
        )
        base = Path(settings.LOOP_DATA_DIR) / "runs" / str(run.pk)
        if base.exists():
            # Left by a database that was reset while the data folder was kept: set aside.
            base.rename(base.with_name(f"{run.pk}.orphaned-{timezone.now():%Y%m%d%H%M%S%f}"))
        (Path(workdir) if workdir else base / "work").mkdir(parents=True, exist_ok=True)
        (base / "artifacts").mkdir(parents=True, exist_ok=True)
        run.append_event(
            "run_created",
            recipe=recipe.slug,
            version=version.number,
            by=actor.name,
            surface=actor.surface,
            budget=limits,
        )
        if step_machine:
            from recipes.planeai.machine import create_machine

            create_machine(run, started=start)  # a run created without starting waits
        if forked:
            forked["carry"](run)  # the fork's history, and where it goes on (runs.fork)
        elif start or not step_machine:
            dispatch.send_on_commit("advance_run", run.pk)
    return run


def _spec(recipe, version):
    # Read afresh (an edited command file reaches this run) and kept on the run.
    try:
        return snapshot_spec(recipe, version)
    except SpecError as exc:
        raise Conflict(f"Recipe '{recipe.slug}' v{version.number} does not load: {exc}") from None


def rerun(
    run: Run, *, actor: Actor | None = None, user=None, on_current_version: bool = False
) -> Run:
    """The same message and inputs again, on the run's recipe version (or the current one)."""
    return start_run(
        run.recipe,
        actor=actor,
        user=user,
        message=run.message,
        inputs=run.inputs,
        version=None if on_current_version else run.recipe_version,
        rerun_of=run,
        budget=run.budget,
        # A step machine works on its repository; a workflow gets a fresh folder.
        workdir=run.workdir if run.recipe.kind == Recipe.Kind.PLANEAI else "",
    )


def fork_run(run: Run, actor: Actor, *, node: str, iteration: int, feedback="", prompt="") -> Run:
    """A new run carrying `run`'s history up to that iteration, going on with this feedback
    or prompt (runs.fork)."""
    from runs.fork import fork_run as fork

    return fork(run, actor, node=node, iteration=iteration, feedback=feedback, prompt=prompt)


# --- cancelling and resuming ---------------------------------------------------------------


def cancel_run(run: Run, actor: Actor, *, reason: str = "") -> Run:
    with transaction.atomic():
        run = lock_run(run.pk)
        if run.is_terminal:
            raise Conflict(f"Run {run.pk} is already {run.status}.")
        run.cancel(actor, reason)
    return run


def set_budget(run: Run, actor: Actor, limits: dict, *, resume: bool = False) -> Run:
    """Change a run's limits (a limit left out keeps its value; an empty one is removed),
    and with `resume` go on after a budget stop."""
    from recipes.formats.budget import BudgetInvalid, clean_budget

    removed = [k for k, v in (limits or {}).items() if v is None or str(v).strip() == ""]
    try:
        given = clean_budget(limits, allow_empty_values=True)
    except BudgetInvalid as exc:
        raise InputError({f"budget.{k}": v for k, v in exc.errors.items()}) from None
    with transaction.atomic():
        run = lock_run(run.pk)
        if run.is_terminal:
            raise Conflict(f"Run {run.pk} is {run.status}; its budget no longer applies.")
        budget = {k: v for k, v in {**run.budget, **given}.items() if k not in removed}
        if budget != run.budget:
            Run.objects.filter(pk=run.pk).update(budget=budget)
            run.budget = budget
            run.append_event("budget_changed", budget=budget, by=actor.name, surface=actor.surface)
        if resume and run.status == Run.Status.BUDGET_EXCEEDED:
            _resume_budget_stop(run, actor)
    return run


def _resume_budget_stop(run: Run, actor: Actor) -> None:
    from runs import budget

    over = next((s for s in budget.limits(run) if s.exceeded), None)
    if over is not None:
        raise Conflict(
            f"Run {run.pk} is still over its budget ({over.words}); raise that limit first."
        )
    if not run.resume_within_budget(actor):
        raise Conflict(f"Run {run.pk} is {run.status}, not stopped by its budget.")
    budget.resume_held_work(run)
    run.update_status()


def resume_run(run: Run, actor: Actor) -> Run:
    """Re-run what did not complete (and `always_run` nodes); a loop restarts at iteration 1.
    After a budget stop, go on where it stopped (once the budget allows). A paused run whose
    gate was decided with `record_only` goes on with that decision."""
    with transaction.atomic():
        run = lock_run(run.pk)
        if run.status == Run.Status.BUDGET_EXCEEDED:
            _resume_budget_stop(run, actor)
            return run
        if run.status == Run.Status.PAUSED and (recorded := recorded_decisions(run)):
            for gate in recorded:  # decisions recorded earlier (`approve --record-only`)
                row = NodeRun.objects.select_for_update().get(pk=gate.node_run_id)
                _apply(run, gate, row, gate.status, actor)
            run.update_status()
            return run
        if run.status not in (Run.Status.FAILED, Run.Status.CANCELLED):
            raise Conflict(
                f"Only a failed or cancelled run can be resumed; run {run.pk} is {run.status}."
            )
        if run.recipe.kind == Recipe.Kind.PLANEAI:
            raise Conflict(
                "A step-machine run cannot be resumed (its sessions and handoffs belong to "
                "that run): re-run it instead."
            )
        reset = []
        for row in resuming.resumed_nodes(run):
            row.reset_for_resume()
            reset.append(row.node_id)
        run.reopen(actor, reset=reset)
        dispatch.send_on_commit("advance_run", run.pk)
    return run


# --- gates: runs/decisions.py (re-exported here: the one way in stays this module) ------

# --- step machines -------------------------------------------------------------------------


def record_handoff(run: Run, actor: Actor, *, role: str, status: str, summary="", data=None):
    """A handoff from a person or a script (the agent's own tool calls the same function)."""
    from recipes.planeai.handoffs import record_handoff as record

    return record(run.pk, role=role, status=status, summary=summary, data=data, actor=actor)


def tick(run: Run, actor: Actor, *, inline: bool = False):
    """Advance a step machine (`loop tick`): start it if it was only created, else run its
    current step and what follows, at most ten ticks. `inline` runs the ticks in this
    process (the command line, which waits to print what happened); otherwise they are
    sent to a worker."""
    from recipes.planeai import runner
    from recipes.planeai.machine import machine_row, start_asked

    with transaction.atomic():
        run = lock_run(run.pk)
        if run.recipe.kind != Recipe.Kind.PLANEAI:
            raise Conflict(f"Run {run.pk} is not a step-machine run.")
        if run.is_terminal or run.status in Run.NEEDS_PERSON:
            raise Conflict(f"Run {run.pk} is {run.status}: there is nothing to tick.")
        row = machine_row(run, lock=True)
        if row is not None and row.status == NodeRun.Status.PAUSED:
            raise Conflict(f"Run {run.pk} waits for a decision at a gate: decide there.")
        run.append_event("tick_requested", by=actor.name, surface=actor.surface)
        if row is None or (row.status == NodeRun.Status.PENDING and row.queued_at is None):
            if row is not None:
                start_asked(row)  # the sweep starts it, should this message be lost
            dispatch.send_on_commit("advance_run", run.pk)
            return None
        if not inline:
            dispatch.send_on_commit("tick_machine", run.pk)
            return None
    return runner.tick(run.pk, trigger="cli")
