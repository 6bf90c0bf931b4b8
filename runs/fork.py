"""Fork a run from one of its finished iterations: a new run of the same recipe version
whose history up to that iteration is carried over, going on from there with new feedback
or a new prompt. The original run is only read.

What is carried (copies marked `carried_from`, shown as history, never executed):
- every top-level node that had finished when the iteration finished, with its iterations
  (and a loop_group's body rows);
- the forked node's iterations up to and including that one.

How the forked node goes on is its kind's business, a `Continuation` per NodeRun kind from
its `LoopKind.continuations` (runs.kinds; a workflow `loop` starts iteration k+1 in its
threaded session, a Python agent lets its workflow replay to the fork point). A row kind
without one cannot be forked (a clear Conflict says so); the copying helpers below are
shared.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db.models import Q
from django.utils import timezone

from runs import kinds, worktree
from runs.errors import Conflict, InputError, NotFound
from runs.models import Iteration, NodeRun, Run
from runs.models.gate import COMMENT_LIMIT

PROMPT_LIMIT = 200_000


@dataclass(frozen=True)
class ForkPoint:
    old: Run
    row: NodeRun  # the forked node in the original run
    it: Iteration  # the iteration forked from
    feedback: str
    prompt: str

    @property
    def number(self) -> int:
        return self.it.number


@dataclass(frozen=True)
class Continuation:
    # Refuse what this kind cannot do (an InputError or a Conflict), before anything is written.
    check: Callable[[ForkPoint], None]
    # Copy the forked node's history into the new run and set it going, inside the
    # transaction that created the run (which holds no lock yet: the run is new).
    carry: Callable[[Run, ForkPoint, dict], None]
    # Whether a row of this kind offers forking at all (its Fork link shows): `check` may
    # still refuse one iteration (a failed one, one at max_iterations).
    offers: Callable[[NodeRun], bool] = lambda row: True
    # Whether the fork form offers to edit the prompt (else it takes feedback only).
    edits_prompt: bool = False


def _candidates(row_kind: str) -> list[tuple[str, Continuation]]:
    """Who continues a row of this kind: each loop kind's (its `continuations` hook, read
    when asked: kinds register once the apps are ready)."""
    found = []
    for kind in kinds.all_kinds():
        given = kind.continuations().get(row_kind)
        if given is not None:
            found.append((kind.name, given))
    return found


def continuation_for(row: NodeRun, run: Run | None = None) -> Continuation | None:
    """The continuation of a forked row. Two kinds may share a row kind (a Python loop's
    agents and a driven loop's pipeline steps are both `agent` rows): the one that offers
    the row continues it; when none does, the run's own kind's check says why not."""
    candidates = _candidates(row.kind)
    for _, continuation in candidates:
        if continuation.offers(row):
            return continuation
    if run is not None:
        owner = run.recipe.kind
        return next((c for name, c in candidates if name == owner), None)
    return None


def forkable(row: NodeRun) -> bool:
    """The one rule for "Fork from here": the row's kind has a continuation that offers it.
    The iteration cards read it (Iteration.can_fork); make_fork refuses the rest."""
    return any(continuation.offers(row) for _, continuation in _candidates(row.kind))


def _refuse_kind(row: NodeRun) -> Conflict:
    return Conflict(
        f"Iterations of a {row.kind} node cannot be forked: only loops can (workflow loops "
        "and loop_groups, step machines' session turns, Python and driven loops)."
    )


def make_fork(run: Run, actor, *, node: str, iteration: int, feedback="", prompt="") -> Run:
    from runs import services

    point = _fork_point(run, node, iteration, (feedback or "").strip(), (prompt or "").strip())
    continuation = continuation_for(point.row, run)
    if continuation is None:
        raise _refuse_kind(point.row)
    continuation.check(point)
    place = {}
    started_from = worktree.fork_start(
        run, point.it.finished_at, node_id=point.it.node_id, iteration=point.it.number
    )
    if started_from is not None:  # its own worktree, as the original's was at that moment
        place = {"workdir": started_from[0], "commit": started_from[1]}
    return services.start_run(
        run.recipe,
        actor,
        message=run.message,
        inputs=run.inputs,
        version=run.recipe_version,
        budget=run.budget,
        # A kind that works on its repository (a step machine) goes on there, as a rerun does.
        workdir=place.get("workdir", "") or (run.workdir if _keeps_workdir(run) else ""),
        lineage=services.Lineage(
            forked={
                "from": run,
                "point": {
                    "node": point.row.node_id,
                    "iteration": point.number,
                    "iteration_id": point.it.pk,
                    "feedback": point.feedback,
                    "prompt": point.prompt,
                    **({"commit": place["commit"]} if place else {}),
                },
                "carry": lambda new: _carry(new, point, continuation, actor),
            }
        ),
    )


def _keeps_workdir(run: Run) -> bool:
    return kinds.of_run(run).rerun_keeps_workdir


def check_fork_point(run: Run, node: str, number: int) -> None:
    """Refuse (NotFound / Conflict) an iteration that cannot be forked, as the fork would."""
    point = _fork_point(run, node, number, "", "")
    continuation = continuation_for(point.row, run)
    if continuation is None:
        raise _refuse_kind(point.row)
    continuation.check(point)  # what its kind refuses, with no feedback or prompt yet


def _fork_point(run: Run, node: str, number: int, feedback: str, prompt: str) -> ForkPoint:
    it = (
        Iteration.objects.select_related("node_run")
        .filter(run=run, node_id=node, number=number)
        .order_by("-generation")
        .first()
    )
    if it is None:
        raise NotFound(f"Run {run.pk} has no iteration {number} of '{node}'.")
    if it.status not in (Iteration.Status.COMPLETED, Iteration.Status.TIMED_OUT):
        raise Conflict(
            f"Iteration {number} of '{node}' is {it.status}: fork from an iteration that "
            "finished with an answer."
        )
    row = it.node_run
    if row.max_iterations and number >= row.max_iterations:
        raise Conflict(
            f"Iteration {number} is the last '{node}' may run (max_iterations "
            f"{row.max_iterations}): there is no next iteration to fork into."
        )
    if len(feedback) > COMMENT_LIMIT:
        raise InputError({"feedback": f"at most {COMMENT_LIMIT:,} characters"})
    if len(prompt) > PROMPT_LIMIT:
        raise InputError({"prompt": f"at most {PROMPT_LIMIT:,} characters"})
    return ForkPoint(run, row, it, feedback, prompt)


def _carry(new: Run, point: ForkPoint, continuation: Continuation, actor) -> None:
    nodes = carry_finished_nodes(new, point)
    counts: dict = {"nodes": nodes}
    continuation.carry(new, point, counts)
    new.append_event(
        "run_forked",
        point.row.node_id,
        from_run=point.old.pk,
        iteration=point.number,
        carried_nodes=nodes,
        carried_iterations=counts.get("iterations", 0),
        feedback=point.feedback,
        prompt_changed=bool(point.prompt),
        by=actor.name,
        surface=actor.surface,
    )


# --- copying, shared by every kind ---------------------------------------------------------


def clone(obj, **overrides):
    """An unsaved copy of a row with `overrides` (the copy's own id comes on save)."""
    values = {
        f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields if not f.primary_key
    }
    values.update(overrides)
    return type(obj)(**values)


def copy_nodes(new: Run, rows, **overrides) -> dict[int, NodeRun]:
    """Copies of `rows` in `new` (generation 0, linked to their originals): old id -> copy."""
    rows = list(rows)
    copies = NodeRun.objects.bulk_create(
        [
            clone(
                row,
                run_id=new.pk,
                generation=0,
                carried_from_id=row.pk,
                lease_expires_at=None,
                **overrides,
            )
            for row in rows
        ]
    )
    return {row.pk: copy for row, copy in zip(rows, copies, strict=True)}


def copy_iterations(new: Run, iterations, node_map: dict[int, NodeRun]) -> dict[int, Iteration]:
    """Copies of `iterations` under the copied nodes (one INSERT however many)."""
    iterations = list(iterations)
    copies = Iteration.objects.bulk_create(
        [
            clone(
                it,
                run_id=new.pk,
                node_run_id=node_map[it.node_run_id].pk,
                generation=0,
                carried_from_id=it.pk,
                lease_expires_at=None,
            )
            for it in iterations
        ]
    )
    return {it.pk: copy for it, copy in zip(iterations, copies, strict=True)}


def carry_finished_nodes(new: Run, point: ForkPoint) -> list[str]:
    """The top-level nodes that had finished when the forked iteration finished (their
    newest attempt), with their iterations and loop_group bodies."""
    cutoff = point.it.finished_at
    latest: dict[str, NodeRun] = {}
    for row in NodeRun.objects.filter(run=point.old, iteration=0).order_by("generation"):
        latest[row.node_id] = row
    own = set(NodeRun.objects.filter(run=new).values_list("node_id", flat=True))
    done = [
        row
        for row in latest.values()
        if row.pk != point.row.pk
        and row.node_id not in own  # made by start_run (a step machine's `steps` node)
        and row.status in (NodeRun.Status.COMPLETED, NodeRun.Status.SKIPPED)
        and row.finished_at is not None
        and cutoff is not None
        and row.finished_at <= cutoff
    ]
    if not done:
        return []
    node_map = copy_nodes(new, done)
    wanted = Q()
    for row in done:
        wanted |= Q(node_run_id=row.pk, generation=row.generation)
    groups = [row for row in done if row.kind == NodeRun.Kind.LOOP_GROUP]
    if groups:
        body = Q()
        for group in groups:
            body |= Q(node_id__startswith=group.node_id + ".", generation=group.generation)
        body_map = copy_nodes(new, NodeRun.objects.filter(run=point.old).filter(body))
        node_map |= body_map
        wanted |= Q(node_run_id__in=list(body_map))  # its body steps' agent calls
    copy_iterations(new, Iteration.objects.filter(wanted).order_by("id"), node_map)
    return [row.node_id for row in done]


def continue_node(new: Run, point: ForkPoint, **state) -> NodeRun:
    """The forked node's copy, running, at the fork point (iteration k done)."""
    from runs.budget import HOLD

    row = point.row
    kept = {k: v for k, v in (row.state or {}).items() if k != HOLD}
    copy = copy_nodes(
        new,
        [row],
        status=NodeRun.Status.RUNNING,
        iteration_count=point.number,
        output=point.it.output,
        output_file=point.it.output_file,
        output_bytes=point.it.output_bytes,
        structured=point.it.structured,
        error="",
        state={**kept, **state},
        attempts=0,
        queued_at=timezone.now(),
        started_at=timezone.now(),
        finished_at=None,
    )[row.pk]
    return copy


def copy_history(new: Run, point: ForkPoint, copy: NodeRun) -> int:
    """The forked node's iterations 1..k of the forked attempt."""
    earlier = Iteration.objects.filter(
        node_run=point.row, generation=point.it.generation, number__lte=point.number
    ).order_by("number")
    return len(copy_iterations(new, earlier, {point.row.pk: copy}))


def start_fork(new: Run) -> None:
    """The fork runs from here (it was made pending, under its lock)."""
    if not new.start():
        raise Conflict(f"the fork (run {new.pk}) is {new.status}, not waiting to start")


def advance_fork(new: Run) -> None:
    from runs import dispatch

    dispatch.send_on_commit("advance_run", new.pk)  # nodes that were not carried start
