"""The kernel's way in: every surface (pages, API, CLI, MCP) starts, decides, cancels and
resumes runs through these, so a rule lives in one place. What only one kind does has that
kind's own services (a step machine's `loop tick` and handoffs:
loops/stepmachine/services.py, loops/stepmachine/handoffs.py).

Services validate, change state through the models inside a transaction, append events,
and enqueue work on commit. They never render anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from recipes.models import Recipe
from recipes.shell_parts import SHELL_PERMISSION
from runs import dispatch, kinds, resuming
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
    offered,
    pending_gate,
    recorded_decisions,
    reject,
    respond,
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
]


# --- starting runs -------------------------------------------------------------------------

# The longest message a run takes: a page, not a document (the start form counts up to it).
MESSAGE_LIMIT = 100_000
MESSAGE_NEEDED = "This recipe works on the message: write what the run is about."
# A recipe whose prompts or commands read the message has nothing to work on without one.
USES_MESSAGE = re.compile(r"\$\{?(?:USER_MESSAGE|ARGUMENTS)\b")


@dataclass(frozen=True)
class Lineage:
    """Where a run the engine starts comes from; no surface gives one. `parent_node` (with
    `child_index`): a child run of that `workflow:` node, started for whoever started the
    parent; `rerun_of`: the run it repeats (`rerun`); `forked` ({"from": run, "point":
    {...}, "carry": callable}): given by runs.fork only."""

    parent_node: NodeRun | None = None
    child_index: int | None = None
    rerun_of: Run | None = None
    forked: dict | None = None

    @property
    def from_a_run(self) -> bool:
        """A child run, a rerun or a fork: what it works on came from another run."""
        return bool(self.parent_node or self.rerun_of or self.forked)

    def run_fields(self, actor: Actor) -> dict:
        """What the run records of where it comes from, and who started it: a child run
        is the engine's doing, on behalf of whoever started the parent."""
        parent, forked = self.parent_node, self.forked
        return {
            "started_by": parent.run.started_by if parent is not None else actor.person,
            "started_by_name": parent.run.started_by_name if parent is not None else actor.name,
            "rerun_of": self.rerun_of,
            "forked_from": forked["from"] if forked else None,
            "fork_point": forked["point"] if forked else {},
            "parent": parent.run if parent is not None else None,
            "parent_node": parent,
            "child_index": self.child_index,
        }


def start_run(
    recipe: Recipe,
    actor: Actor,
    *,
    message: str = "",
    inputs: dict | None = None,
    workdir: str = "",
    repository: str = "",
    version=None,
    budget: dict | None = None,
    budget_replaces_recipe: bool = False,
    start: bool = True,
    lineage: Lineage | None = None,
) -> Run:
    """A new run of `recipe` started by `actor` (its role checked on the recipe's project).
    `budget` (limits as a person gave them) replaces the recipe's limits one by one, or all
    of them (`budget_replaces_recipe`: a form that showed them). `start=False` only creates
    a run whose kind waits for a first trigger (a step machine's `loop tick`). `lineage`:
    the engine's (child runs, reruns, forks). `repository`: one the kind allows (from the
    start form or the API); `workdir`: the command line's, or a rerun's or fork's."""
    actor.check("runs.operate_run", recipe)
    lineage = lineage or Lineage()
    version = _startable_version(recipe, version)
    kind = kinds.get(recipe.kind)
    if repository:  # before anything else is read: where the run may work at all
        kind.check_repository(repository)
        workdir = repository
    spec, snapshot = _spec(recipe, version)
    cleaned, limits = _given(
        recipe, version, spec, lineage, message, inputs, budget, budget_replaces_recipe
    )
    writes_shell = actor.rights is None or actor.rights.has_perm(SHELL_PERMISSION, recipe)
    child = lineage.parent_node is not None
    workdir = kind.check_start(spec, cleaned, workdir, writes_shell, message=message, child=child)
    with transaction.atomic():
        run = Run.objects.create(
            recipe=recipe,
            recipe_version=version,
            message=message,
            inputs=cleaned,
            budget=limits,
            snapshot=snapshot,
            workdir=workdir,
            **lineage.run_fields(actor),
        )
        _make_folders(run, workdir)
        run.append_event(
            "run_created",
            recipe=recipe.slug,
            version=version.number,
            by=actor.name,
            surface=actor.surface,
            budget=limits,
        )
        advance = kind.created(run, start)  # the kind's setup; start=False: created only
        if lineage.forked:
            lineage.forked["carry"](run)  # the fork's history, and where it goes on (runs.fork)
        elif advance:
            dispatch.send_on_commit("advance_run", run.pk)
    return run


def start_refusal(recipe: Recipe, version=None) -> str:
    """Why no run of `recipe` may start on `version` (or its current one); "" when one may.
    The start form shows it instead of the form."""
    if not recipe.enabled:
        return f"Recipe '{recipe.slug}' is disabled."
    version = version or recipe.current_version
    if version is None or not recipe.valid and version == recipe.current_version:
        return f"Recipe '{recipe.slug}' has errors; fix it before starting a run."
    return ""


def _startable_version(recipe: Recipe, version):
    """The version a run of `recipe` starts on (`version`, or the current one), if it may."""
    refusal = start_refusal(recipe, version)
    if refusal:
        raise Conflict(refusal)
    return version or recipe.current_version


def needs_message(recipe: Recipe, source: str | None = None) -> bool:
    """Whether a run of `recipe` (of `source`, a version's; else the current one) has
    nothing to work on without a message: its kind hands the message over as the task (a
    driven host), or its prompts or commands read it."""
    text = recipe.source if source is None else source
    return kinds.get(recipe.kind).asks_message or bool(USES_MESSAGE.search(text or ""))


def message_problem(recipe: Recipe, message: str, source: str | None = None) -> str:
    """What is wrong with `message` for a run of `recipe`; "" when nothing is. The one
    rule every surface's start goes by (start_run)."""
    if len(message) > MESSAGE_LIMIT:
        return f"The message is {len(message):,} characters; the limit is {MESSAGE_LIMIT:,}."
    if not message.strip() and needs_message(recipe, source):
        return MESSAGE_NEEDED
    return ""


def _given(recipe, version, spec, lineage, message, inputs, budget, replaces_recipe):
    """The run's inputs and budget from what its surface gave, its message checked too:
    refused with every error at once (InputError), so a form shows them together. A run
    from another run (a child, a rerun, a fork) carries the message the first was given."""
    problem = "" if lineage.from_a_run else message_problem(recipe, message, version.source)
    errors = {"message": problem} if problem else {}
    child = lineage.parent_node is not None
    cleaned = _cleaned_inputs(spec, inputs, child=child, errors=errors)
    limits = _limits(spec, budget, replaces_recipe=replaces_recipe, errors=errors)
    if errors:
        raise InputError(errors)
    return cleaned, limits


def _cleaned_inputs(spec, inputs: dict | None, *, child: bool, errors: dict) -> dict:
    """The run's inputs, checked against those the recipe declares (what is wrong goes into
    `errors`)."""
    from recipes.inputs import InputsInvalid, clean_inputs

    try:
        spec_inputs = dict(getattr(spec, "inputs", {}) or {})
        if child and not spec_inputs:
            return dict(inputs or {})  # no declared inputs: a parent's values pass as given
        return clean_inputs(spec_inputs, inputs or {})
    except InputsInvalid as exc:
        errors.update(exc.errors)
        return {}


def _limits(spec, budget: dict | None, *, replaces_recipe: bool, errors: dict) -> dict:
    """The run's budget: the limits given replace the recipe's one by one, or all of them
    (what is wrong goes into `errors`, as "budget.<limit>")."""
    from recipes.formats.budget import BudgetInvalid, clean_budget, merged

    try:
        given = clean_budget(budget, allow_empty_values=True)
        return merged(getattr(spec, "budget", None), given, replace=replaces_recipe)
    except BudgetInvalid as exc:
        errors.update({f"budget.{k}": v for k, v in exc.errors.items()})
        return {}


def _make_folders(run: Run, workdir: str) -> None:
    """The run's folders under LOOP_DATA_DIR: its work folder (unless it works in
    `workdir`) and its artifacts."""
    base = Path(settings.LOOP_DATA_DIR) / "runs" / str(run.pk)
    if base.exists():
        # Left by a database that was reset while the data folder was kept: set aside.
        base.rename(base.with_name(f"{run.pk}.orphaned-{timezone.now():%Y%m%d%H%M%S%f}"))
    (Path(workdir) if workdir else base / "work").mkdir(parents=True, exist_ok=True)
    (base / "artifacts").mkdir(parents=True, exist_ok=True)


def _spec(recipe, version):
    # Read afresh (an edited command file reaches this run) and kept on the run.
    try:
        return snapshot_spec(recipe, version)
    except SpecError as exc:
        raise Conflict(f"Recipe '{recipe.slug}' v{version.number} does not load: {exc}") from None


def rerun(run: Run, actor: Actor, *, on_current_version: bool = False) -> Run:
    """The same message and inputs again, on the run's recipe version (or the current one)."""
    actor.check("runs.operate_run", run)
    return start_run(
        run.recipe,
        actor,
        message=run.message,
        inputs=run.inputs,
        version=None if on_current_version else run.recipe_version,
        budget=run.budget,
        # A kind that works on its repository (a step machine) stays; others get a new folder.
        workdir=run.workdir if kinds.of_run(run).rerun_keeps_workdir else "",
        lineage=Lineage(rerun_of=run),
    )


def fork_run(run: Run, actor: Actor, *, node: str, iteration: int, feedback="", prompt="") -> Run:
    """A new run carrying `run`'s history up to that iteration, going on with this feedback
    or prompt (runs.fork)."""
    from runs.fork import make_fork as fork

    actor.check("runs.operate_run", run)
    return fork(run, actor, node=node, iteration=iteration, feedback=feedback, prompt=prompt)


# --- cancelling and resuming ---------------------------------------------------------------


def cancel_run(run: Run, actor: Actor, *, reason: str = "") -> Run:
    actor.check("runs.operate_run", run)
    with transaction.atomic():
        run = lock_run(run.pk)
        if run.is_terminal:
            raise Conflict(f"Run {run.pk} is already {run.status_word}.")
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
    actor.check("runs.operate_run", run)
    with transaction.atomic():
        run = lock_run(run.pk)
        if run.is_terminal:
            raise Conflict(f"Run {run.pk} is {run.status_word}; its budget no longer applies.")
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
        raise Conflict(f"Run {run.pk} is {run.status_word}, not stopped by its budget.")
    budget.resume_held_work(run)
    run.update_status()


def resume_run(run: Run, actor: Actor) -> Run:
    """Re-run what did not complete (and `always_run` nodes); a loop restarts at iteration 1.
    After a budget stop, go on where it stopped (once the budget allows). A paused run whose
    gate was decided with `record_only` goes on with that decision."""
    actor.check("runs.operate_run", run)
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
                f"Only a failed or cancelled run can be resumed; run {run.pk} is {run.status_word}."
            )
        if refused := kinds.of_run(run).resume_refused:
            raise Conflict(refused)
        reset = []
        for row in resuming.resumed_nodes(run):
            row.reset_for_resume()
            reset.append(row.node_id)
        run.reopen(actor, reset=reset)
        dispatch.send_on_commit("advance_run", run.pk)
    return run


# --- gates: runs/decisions.py (re-exported above, so surfaces import them from here) ----
