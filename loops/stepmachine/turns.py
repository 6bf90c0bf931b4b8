"""One turn of a role's session, on a worker: the kernel's `run_iteration` hands iterations
of `session` rows here (runs.executor.handover).

The agent gets the console's tools for its run and role (`record_handoff`) in
`AgentRequest.tools`: CLI agents reach them through the channel their provider serves
while they run (LOOP_HANDOFF_CMD and LOOP_MCP_CMD in their environment; see
runs/agent_tools/serve.py), HTTP providers call the same ToolBox in-process. When the turn ends — answered or failed —
the runner is ticked: a step may be waiting for this session.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction

from runs import dispatch
from runs.agent_tools import ToolBox, ToolContext
from runs.executor.agent import StepFailed, request_for, run_call
from runs.executor.spec import spec_for
from runs.executor.state import lock_run, on_fresh_connection
from runs.executor.stream import OutputStream
from runs.models import Iteration, NodeRun
from runs.providers import registry
from runs.providers.base import Cancelled, ProviderError

from . import git
from .context import RERUN_HEADING, base_env
from .handoffs import RECORD_HANDOFF
from .machine import machine_row
from .spec import TICK_TASK

log = logging.getLogger(__name__)


def run_turn(it: Iteration) -> None:
    run, row = it.run, it.node_run
    if run.is_terminal:
        it.cancel_if_pending(f"the run ended ({run.status_word}) first")
        return
    spec, provider, problem = _recipe_and_provider(run, row.node_id)
    session_id = row.state.get("session_id") or None
    tree = TurnTree.of(run, row)
    with transaction.atomic():
        locked = lock_run(run.pk, with_recipe=False)
        if locked.is_terminal or not it.start(locked, it.prompt, session_id):
            return
        began = turn_began(row, it, base=tree.before, head=tree.head if tree.shared else None)
    stream = OutputStream(Iteration, it.pk, it.attempts, run.pk)
    # Run again after its worker was lost: told what the lost attempt left, and its
    # changes counted from where the turn began (docs/recipes.md, "A re-run turn").
    prompt = (tree.resume(began) if it.attempts > 1 else "") + it.prompt
    try:
        if problem is not None:
            raise problem
        request = _turn_request(run, spec, it, prompt, tree.workdir, session_id)
        outcome = run_call(provider, request, stream)
    except Cancelled:
        return  # what the agent printed stays on the cancelled turn (run_call)
    except (OperationalError, InterfaceError):
        raise
    except (StepFailed, ProviderError) as exc:
        on_fresh_connection(_failed, it, str(exc), stream)
        return
    except Exception as exc:  # a turn that raises crashes its session
        log.exception("turn %s crashed", it.pk)
        on_fresh_connection(_failed, it, f"{type(exc).__name__}: {exc}", stream)
        return
    on_fresh_connection(_done, it, outcome, tree.changes(run, row.node_id, it.number))


def _recipe_and_provider(run, role_id: str) -> tuple:
    """The run's recipe and the role's provider, or what went wrong finding them (the turn
    is claimed first, then fails with it like any failure)."""
    try:
        spec = spec_for(run)
        name = spec.roles[role_id].provider
        return spec, registry.resolve(None if name == "default" else name, spec, run), None
    except (OperationalError, InterfaceError):
        raise
    except Exception as exc:  # noqa: BLE001 - claimed, then reported like any failure
        return None, None, exc


def _turn_request(run, spec, it: Iteration, prompt: str, workdir: str, session_id):
    """The turn's agent call (runs.executor.agent.request_for): the role's settings, its
    working tree, its session, the handoff tool, and what a command agent is told."""
    role_id = it.node_run.node_id
    role = spec.roles[role_id]
    tools = ToolBox(
        ToolContext(run_id=run.pk, node_id=role_id, iteration_id=it.pk, role=role_id),
        [RECORD_HANDOFF],
    )
    flags = {
        "LOOP_READ_ONLY": "1" if role.read_only else "0",
        "LOOP_AUTO_APPROVE": "1" if spec.policy.auto_approve else "0",
    }
    return request_for(
        run,
        role,
        prompt,
        spec=spec,
        node_id=role_id,
        iteration=it.number,
        session_id=session_id,
        workdir=workdir,
        env={**base_env(run, role_id), **flags},
        tools=tools,
        read_only=role.read_only,
        auto_approve=spec.policy.auto_approve,
    )


@dataclass
class TurnTree:
    """The working tree a turn works in, and where its changes count from."""

    workdir: str
    writes: bool  # a role that may write, in a repository: its changes are recorded
    shared: bool  # the person's own tree (isolation: project)
    store: Path  # where a shared tree's snapshots are kept
    head: str | None  # the commit the tree was at
    before: str | None  # where the turn's changes count from

    @classmethod
    def of(cls, run, row: NodeRun) -> TurnTree:
        workdir = row.state.get("workdir") or "."
        writes = not row.state.get("read_only") and git.is_repository(workdir)
        # isolation: project shares the person's working tree: the turn's diff is recorded
        # from snapshots and nothing is committed for them (their own changes stay theirs).
        shared = writes and row.state.get("isolation") == "project"
        # The snapshots' objects go to the run's data folder, not the person's repository.
        store = Path(settings.LOOP_DATA_DIR) / "runs" / str(run.pk) / "snapshots" / row.node_id
        head = _head(workdir) if writes else None
        before = _snapshot(workdir, store) if shared else head
        return cls(workdir, writes, shared, store, head, before)

    def resume(self, began: dict) -> str:
        """A turn run again: its changes count from where it began (`turn_began`), and its
        prompt opens with what the lost attempt left (`rerun_note`), returned."""
        self.before = began.get("base") or self.before
        # A shared tree's base is a snapshot outside its repository: its commits are listed
        # from the commit it was at.
        since = began.get("head") if self.shared else self.before
        return rerun_note(self.workdir if self.writes else None, since)

    def changes(self, run, role_id: str, number: int) -> dict | None:
        """What turn `number` changed in the tree (None: nothing to record)."""
        if not (self.writes and self.before):
            return None
        try:
            if self.shared:
                after = git.snapshot(self.workdir, self.store)
                return git.tree_changes(self.workdir, self.before, after, self.store)
            # The role's own worktree: what the agent left uncommitted is committed on
            # its branch, so the review request carries it.
            git.commit_all(self.workdir, f"loop run {run.pk}: {role_id} turn {number}")
            return git.changes(self.workdir, self.before)
        except git.GitError as exc:
            log.warning("could not record the %s turn of run %s: %s", role_id, run.pk, exc)
            return None


def _snapshot(workdir: str, store: Path) -> str | None:
    try:
        return git.snapshot(workdir, store)
    except git.GitError as exc:
        log.warning("could not snapshot %s before a turn: %s", workdir, exc)
        return None


def turn_began(row: NodeRun, it: Iteration, *, base: str | None, head: str | None) -> dict:
    """Where this turn began (the tree's snapshot or commit its changes count from, and a
    shared tree's commit), as its first attempt found it: kept on the session's row by
    the first attempt, read back by an attempt that runs it again after a lost worker.
    The caller holds the run's lock."""
    session = NodeRun.objects.select_for_update().get(pk=row.pk)
    kept = session.state.get("turn_began") or {}
    if it.attempts > 1 and kept.get("turn") == it.number:
        return kept
    began = {"turn": it.number, "base": base, "head": head}
    # Not a status change: the session's state, written alone.
    NodeRun.objects.filter(pk=row.pk).update(state={**session.state, "turn_began": began})
    return began


def rerun_note(workdir: str | None, base: str | None) -> str:
    """What a re-run turn is told first: an earlier attempt of it was interrupted (its
    worker was lost) and may have done part of the work; what it left is listed."""
    lines = [
        RERUN_HEADING,
        "",
        "An earlier attempt of this turn was interrupted before it ended (its worker was "
        "lost). It may have done part of the work: look at the working tree before you "
        "redo anything, and finish what is left.",
    ]
    if workdir and base:
        try:
            commits, uncommitted = git.left_since(workdir, base)
        except git.GitError:
            commits, uncommitted = [], []
        lines.append("")
        lines.append(
            f"Commits since this turn began ({base[:12]}): "
            + ("none" if not commits else "\n" + "\n".join(f"- {c}" for c in commits[:50]))
        )
        lines.append(
            "Uncommitted changes: "
            + ("none" if not uncommitted else "\n" + "\n".join(f"- {c}" for c in uncommitted[:50]))
        )
    return "\n".join(lines) + "\n\n"


def _head(workdir: str) -> str | None:
    try:
        return git.head(workdir)
    except git.GitError:
        return None  # no commit yet


def _done(it: Iteration, outcome, changes: dict | None) -> None:
    result = outcome.result
    with transaction.atomic():
        run = lock_run(it.run_id)
        # A turn keeps no structured answer (it is asked for none).
        if not it.complete(run, outcome, structured=None):
            return
        row = NodeRun.objects.select_for_update().get(pk=it.node_run_id)
        row.state = {**row.state, "session_id": result.session_id or row.state.get("session_id")}
        NodeRun.objects.filter(pk=row.pk).update(
            state=row.state, output=outcome.text, **outcome.fields
        )
        if changes:
            # The same event a run's worktree records: the iteration card shows the diff.
            run.append_event(
                "worktree_diff",
                row.node_id,
                iteration=it.number,
                session=row.generation + 1,
                **changes,
            )
        _after_turn(run, row)


def _failed(it: Iteration, error: str, stream: OutputStream) -> None:
    raw = stream.text
    with transaction.atomic():
        run = lock_run(it.run_id)
        if not it.fail(run, error, raw_output=raw, output=raw, **stream.fields()):
            return
        row = NodeRun.objects.select_for_update().get(pk=it.node_run_id)
        # The session is gone: the next session.create of this role starts a fresh one.
        row.fail(run, f"turn {it.number} failed: {error}")
        _after_turn(run, row, failed=True)


def _after_turn(run, row: NodeRun, failed: bool = False) -> None:
    machine = machine_row(run)
    if machine is None or machine.is_terminal or run.is_terminal:
        if not failed and row.status == NodeRun.Status.RUNNING:
            row.complete(run, row.output, reason="the run ended")
        return
    dispatch.send_on_commit(TICK_TASK, run.pk)
