"""The only way in: every surface (pages, API, CLI) calls these, so a rule lives in one place.

Services validate, change state through the models inside a transaction, append events,
and enqueue work on commit. They never render anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from recipes.models import Recipe
from runs.executor import group as group_exec
from runs.executor.spec import SpecError, node_spec, spec_for, spec_of
from runs.executor.state import (
    complete_node,
    enqueue,
    fail_node,
    lock_run,
    max_iterations_error,
    next_iteration,
    stop_all_work,
)
from runs.models import Gate, NodeRun, Run


class ServiceError(Exception):
    status = 400


class NotAllowed(ServiceError):
    status = 403


class Conflict(ServiceError):
    status = 409


class AlreadyDecided(Conflict):
    def __init__(self, gate: Gate):
        who = gate.decided_by.get_username() if gate.decided_by_id else "the engine"
        when = (
            timezone.localtime(gate.decided_at).strftime("%Y-%m-%d %H:%M:%S")
            if gate.decided_at
            else "earlier"
        )
        super().__init__(f"This gate was already decided by {who} at {when} ({gate.status}).")
        self.gate = gate


@dataclass
class InputError(ServiceError):
    errors: dict

    def __post_init__(self):
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.errors.items()))

    status = 422


def can_operate(user) -> bool:
    return bool(user and user.is_authenticated and user.has_perm("runs.operate_run"))


def require_operator(user) -> None:
    if not can_operate(user):
        raise NotAllowed("You need the operator role to do this.")


# --- starting runs -------------------------------------------------------------------------


def start_run(
    recipe: Recipe,
    *,
    user=None,
    message: str = "",
    inputs: dict | None = None,
    workdir: str = "",
    version=None,
    rerun_of: Run | None = None,
) -> Run:
    from recipes.inputs import InputsInvalid, clean_inputs

    if user is not None:
        require_operator(user)
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
            started_by=user if user is not None and user.is_authenticated else None,
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
            by=user.get_username() if user is not None and user.is_authenticated else "",
        )
        enqueue("advance_run", run.pk)
    return run


def _declared_inputs(recipe, version) -> dict:
    # The same cached parse the engine uses for this version: a start parses it once.
    try:
        spec = spec_of(recipe, version)
    except SpecError as exc:
        raise Conflict(f"Recipe '{recipe.slug}' v{version.number} does not load: {exc}") from None
    return dict(getattr(spec, "inputs", {}) or {})


def rerun(run: Run, *, user=None) -> Run:
    return start_run(
        run.recipe,
        user=user,
        message=run.message,
        inputs=run.inputs,
        version=run.recipe_version,
        rerun_of=run,
    )


# --- cancelling and resuming ---------------------------------------------------------------


def cancel_run(run: Run, *, user=None, surface: str = "console", reason: str = "") -> Run:
    if user is not None:
        require_operator(user)
    with transaction.atomic():
        run = lock_run(run.pk)
        if run.is_terminal:
            raise Conflict(f"Run {run.pk} is already {run.status}.")
        who = user.get_username() if user is not None else "system"
        text = reason or f"cancelled by {who}"
        stop_all_work(run, text)
        run.set_status(Run.Status.CANCELLED, error=text, by=who, surface=surface)
    return run


def resume_run(run: Run, *, user=None, surface: str = "console") -> Run:
    """Re-run what did not complete (and `always_run` nodes); a loop restarts at iteration 1."""
    if user is not None:
        require_operator(user)
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
                row.generation += 1
                row.status = NodeRun.Status.PENDING
                row.queued_at = row.started_at = row.finished_at = row.lease_expires_at = None
                row.output, row.error, row.skip_reason = "", "", ""
                row.structured, row.state, row.iteration_count, row.attempts = None, {}, 0, 0
                row.save()
                reset.append(row.node_id)
        who = user.get_username() if user is not None else "system"
        run.set_status(Run.Status.RUNNING, error="", by=who, surface=surface, reset=reset)
        enqueue("advance_run", run.pk)
    return run


# --- gates ---------------------------------------------------------------------------------


def pending_gate(run: Run) -> Gate | None:
    return run.gates.filter(status=Gate.Status.PENDING).select_related("iteration").first()


def approve(
    gate: Gate, *, user=None, comment: str = "", decision: str = "", surface: str = "console"
) -> Gate:
    """Approve with no comment on a completed iteration finalizes; otherwise iterate."""
    return _decide(
        gate,
        "approve",
        user=user,
        comment=(comment or "").strip(),
        decision=decision,
        surface=surface,
    )


def reject(gate: Gate, *, user=None, reason: str = "", surface: str = "console") -> Gate:
    return _decide(
        gate, "reject", user=user, comment=(reason or "").strip(), decision="", surface=surface
    )


def _decide(gate: Gate, action: str, *, user, comment: str, decision: str, surface: str) -> Gate:
    if user is not None:
        require_operator(user)
    if gate.kind == Gate.Kind.APPROVAL and action == "approve" and gate.decisions:
        ids = [d["id"] for d in gate.decisions]
        if decision not in ids:
            raise ServiceError(f"Choose one of the decisions: {', '.join(ids)}.")
    elif decision:
        raise ServiceError("This gate declares no decisions.")
    with transaction.atomic():
        run = lock_run(gate.run_id)
        if gate.kind == Gate.Kind.LOOP and action == "approve":
            status = (
                Gate.Status.ACCEPTED
                if gate.completion_signaled and not comment
                else Gate.Status.ITERATED
            )
        else:
            status = Gate.Status.ACCEPTED if action == "approve" else Gate.Status.REJECTED
        now = timezone.now()
        won = Gate.objects.filter(pk=gate.pk, status=Gate.Status.PENDING).update(
            status=status,
            comment=comment,
            decision=decision,
            decided_by=user if user is not None and user.is_authenticated else None,
            decided_at=now,
            surface=surface,
        )
        gate.refresh_from_db()
        if not won:
            raise AlreadyDecided(gate)
        row = NodeRun.objects.select_for_update().get(pk=gate.node_run_id)
        who = user.get_username() if user is not None else "system"
        run.append_event(
            "gate_decided",
            gate.node_id,
            gate=gate.pk,
            status=status,
            by=who,
            surface=surface,
            comment=comment,
            decision=decision,
        )
        _apply(run, gate, row, status, comment, decision, who)
    return gate


def _apply(
    run: Run, gate: Gate, row: NodeRun, status: str, comment: str, decision: str, who: str
) -> None:
    if run.recipe.kind == "python":
        # A Python loop's own code decides what a decision means (recipes.python).
        from recipes.python.gates import gate_decided

        gate_decided(run, gate, row)
    elif status == Gate.Status.REJECTED:
        fail_node(run, row, f"rejected at the gate by {who}" + (f": {comment}" if comment else ""))
        return
    elif gate.kind == Gate.Kind.APPROVAL:
        spec = spec_for(run)
        capture = node_spec(spec, row.node_id).approval.capture_response
        output = decision or (comment if capture else "") or "approved"
        complete_node(run, row, output, decided_by=who)
    elif status == Gate.Status.ACCEPTED:
        it = gate.iteration
        complete_node(
            run, row, it.output, it.structured, iterations=it.number, channels=gate.channels
        )
    else:
        spec = spec_for(run)
        node = node_spec(spec, row.node_id)
        loop = node.loop or node.loop_group
        if row.iteration_count >= loop.max_iterations:
            fail_node(run, row, max_iterations_error(row.node_id, loop))
        elif row.kind == "loop_group":
            group_exec.begin_next(
                run, row, row.iteration_count + 1, feedback=comment, after_gate=True
            )
        else:
            next_iteration(run, row, row.iteration_count + 1, feedback=comment, after_gate=True)
    if (
        run.status == Run.Status.PAUSED
        and not NodeRun.objects.filter(run=run, status=NodeRun.Status.PAUSED).exists()
    ):
        run.set_status(Run.Status.RUNNING)
    if row.status != NodeRun.Status.RUNNING:
        # A node that keeps running has sent its own next step (the iteration, or the
        # group's advance); the scheduler has nothing to do, and an extra advance_run would
        # only contend for the run's lock with the next iteration's claim.
        enqueue("advance_run", run.pk)
