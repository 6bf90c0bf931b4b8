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
from runs import dispatch
from runs.actor import Actor, can_operate
from runs.errors import AlreadyDecided, Conflict, InputError, NotAllowed, NotFound, ServiceError
from runs.executor import group as group_exec
from runs.executor.spec import SpecError, node_spec, spec_for, spec_of
from runs.executor.state import lock_run, max_iterations_error
from runs.models import Gate, NodeRun, Run

__all__ = [
    "Actor",
    "AlreadyDecided",
    "Conflict",
    "InputError",
    "NotAllowed",
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
) -> Run:
    """A new run of `recipe` started by `actor` (whose permission its edge checked:
    `Actor.operator`). `user=` is the older spelling of a console actor, checked here;
    `started_via` names a starter without a person when no actor is given."""
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
    spec_inputs = _declared_inputs(recipe, version)
    try:
        cleaned = clean_inputs(spec_inputs, inputs or {})
    except InputsInvalid as exc:
        raise InputError(exc.errors) from None
    with transaction.atomic():
        run = Run.objects.create(
            recipe=recipe,
            recipe_version=version,
            message=message,
            inputs=cleaned,
            started_by=actor.person,
            rerun_of=rerun_of,
            workdir=workdir,
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
        )
        dispatch.send_on_commit("advance_run", run.pk)
    return run


def _declared_inputs(recipe, version) -> dict:
    # The same cached parse the engine uses for this version: a start parses it once.
    try:
        spec = spec_of(recipe, version)
    except SpecError as exc:
        raise Conflict(f"Recipe '{recipe.slug}' v{version.number} does not load: {exc}") from None
    return dict(getattr(spec, "inputs", {}) or {})


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
    )


# --- cancelling and resuming ---------------------------------------------------------------


def cancel_run(run: Run, actor: Actor, *, reason: str = "") -> Run:
    with transaction.atomic():
        run = lock_run(run.pk)
        if run.is_terminal:
            raise Conflict(f"Run {run.pk} is already {run.status}.")
        run.cancel(actor, reason)
    return run


def resume_run(run: Run, actor: Actor) -> Run:
    """Re-run what did not complete (and `always_run` nodes); a loop restarts at iteration 1."""
    with transaction.atomic():
        run = lock_run(run.pk)
        if run.status not in (Run.Status.FAILED, Run.Status.CANCELLED):
            raise Conflict(
                f"Only a failed or cancelled run can be resumed; run {run.pk} is {run.status}."
            )
        spec = spec_for(run)
        reset = []
        for row in NodeRun.objects.filter(run=run, iteration=0):
            always = getattr(node_spec(spec, row.node_id), "always_run", False)
            if row.status != NodeRun.Status.COMPLETED or always:
                row.reset_for_resume()
                reset.append(row.node_id)
        run.reopen(actor, reset=reset)
        dispatch.send_on_commit("advance_run", run.pk)
    return run


# --- gates ---------------------------------------------------------------------------------


def gate_for_decision(run: Run, gate_id: int | None = None) -> Gate:
    """The gate a console form, an API call or the CLI decides (see GateQuerySet)."""
    return Gate.objects.for_decision(run, gate_id)


def approve(gate_id: int, actor: Actor, *, comment: str = "", decision: str = "") -> Gate:
    """Approve: what that means (accept, or iterate with the comment) is Gate.outcome."""
    return decide(gate_id, actor, "approve", comment=comment, decision=decision)


def reject(gate_id: int, actor: Actor, *, reason: str = "") -> Gate:
    return decide(gate_id, actor, "reject", comment=reason)


def decide(gate_id: int, actor: Actor, action: str, *, comment="", decision="") -> Gate:
    """Load the gate under the run's lock, let it record the decision, then move its node."""
    run_id = Gate.objects.filter(pk=gate_id).values_list("run_id", flat=True).first()
    if run_id is None:
        raise NotFound(f"No gate {gate_id}.")
    with transaction.atomic():
        run = lock_run(run_id)
        gate = Gate.objects.select_related("iteration", "decided_by").get(pk=gate_id)
        status = gate.decide(run, actor, action, comment, decision)
        row = NodeRun.objects.select_for_update().get(pk=gate.node_run_id)
        _apply(run, gate, row, status, actor)
        run.update_status()
    return gate


def _apply(run: Run, gate: Gate, row: NodeRun, status: str, actor: Actor) -> None:
    """Move the gate's node on. Each transition sends what comes next (the node's own next
    iteration, or one advance_run when the node ends) and nothing else does."""
    if run.recipe.kind == "python":
        # A Python loop's own code decides what a decision means (recipes.python).
        from recipes.python.gates import gate_decided

        gate_decided(run, gate, row)
        return
    if status == Gate.Status.REJECTED:
        reason = f"rejected at the gate by {actor.name}"
        row.fail(run, reason + (f": {gate.comment}" if gate.comment else ""))
        return
    if gate.kind == Gate.Kind.APPROVAL:
        capture = node_spec(spec_for(run), row.node_id).approval.capture_response
        output = gate.decision or (gate.comment if capture else "") or "approved"
        row.complete(run, output, decided_by=actor.name)
    elif status == Gate.Status.ACCEPTED:
        it = gate.iteration
        row.complete(run, it.output, it.structured, iterations=it.number, channels=gate.channels)
    else:
        node = node_spec(spec_for(run), row.node_id)
        loop = node.loop or node.loop_group
        number = row.iteration_count + 1
        if row.iteration_count >= loop.max_iterations:
            row.fail(run, max_iterations_error(row.node_id, loop))
        elif row.kind == "loop_group":
            group_exec.begin_next(run, row, number, feedback=gate.comment, after_gate=True)
        else:
            row.start_iteration(run, number, feedback=gate.comment, after_gate=True)
