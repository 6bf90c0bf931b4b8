"""One turn of a role's session, on a worker: the kernel's `run_iteration` hands iterations
of `session` rows here (runs.executor.loop).

The agent gets the console's tools for its run and role (`record_handoff`) in
`AgentRequest.tools`: CLI agents reach them through the channel their provider serves
while they run (LOOP_HANDOFF_CMD and LOOP_MCP_CMD in their environment; see
runs/agent_tools/serve.py), HTTP providers call the same ToolBox in-process. When the turn ends — answered or failed —
the runner is ticked: a step may be waiting for this session.
"""

from __future__ import annotations

import logging
from pathlib import Path

from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction

from runs import dispatch
from runs.agent_tools import ToolBox, ToolContext
from runs.executor.agent import StepFailed, call_agent
from runs.executor.spec import spec_for
from runs.executor.state import lock_run, on_fresh_connection
from runs.executor.stream import OutputStream
from runs.models import Iteration, NodeRun
from runs.providers import registry
from runs.providers.base import AgentRequest, Cancelled, ProviderError
from runs.sandbox import agent_network, limits_of

from . import git
from .context import RERUN_HEADING, base_env
from .handoffs import RECORD_HANDOFF
from .machine import machine_row

log = logging.getLogger(__name__)
IDLE_TIMEOUT_SECONDS = 30 * 60


def run_turn(it: Iteration) -> None:
    run, row = it.run, it.node_run
    if run.is_terminal:
        it.cancel_if_pending(f"the run ended ({run.status}) first")
        return
    role_id = row.node_id
    prompt_error = None
    try:
        spec = spec_for(run)
        role = spec.roles[role_id]
        provider = registry.resolve(None if role.provider == "default" else role.provider, spec)
    except (OperationalError, InterfaceError):
        raise
    except Exception as exc:  # noqa: BLE001 - claimed, then reported like any failure
        prompt_error = exc
    session_id = row.state.get("session_id") or None
    workdir = row.state.get("workdir") or "."
    writes = not row.state.get("read_only") and git.is_repository(workdir)
    # isolation: project shares the person's working tree: the turn's diff is recorded from
    # snapshots and nothing is committed for them (their own changes stay theirs).
    shared = writes and row.state.get("isolation") == "project"
    # The snapshots' objects go to the run's data folder, not the person's repository.
    store = Path(settings.LOOP_DATA_DIR) / "runs" / str(run.pk) / "snapshots" / role_id
    head = _head(workdir) if writes else None
    before = _snapshot(workdir, store) if shared else head
    with transaction.atomic():
        locked = lock_run(run.pk, with_recipe=False)
        if locked.is_terminal or not it.start(locked, it.prompt, session_id):
            return
        began = turn_began(row, it, base=before, head=head if shared else None)
    stream = OutputStream(Iteration, it.pk, it.attempts, run.pk)
    prompt = it.prompt
    if it.attempts > 1:
        # Run again after its worker was lost: told what the lost attempt left, and its
        # changes counted from where the turn began (docs/recipes.md, "A re-run turn").
        before = began.get("base") or before
        # A shared tree's base is a snapshot outside its repository: its commits are listed
        # from the commit it was at.
        since = began.get("head") if shared else before
        prompt = rerun_note(workdir if writes else None, since) + prompt
    try:
        if prompt_error is not None:
            raise prompt_error
        toolbox = ToolBox(
            ToolContext(run_id=run.pk, node_id=role_id, iteration_id=it.pk, role=role_id),
            [RECORD_HANDOFF],
        )
        request = AgentRequest(
            prompt=prompt,
            workdir=workdir,
            session_id=session_id,
            idle_timeout=IDLE_TIMEOUT_SECONDS,
            env={
                **base_env(run, role_id),
                "LOOP_READ_ONLY": "1" if role.read_only else "0",
                "LOOP_AUTO_APPROVE": "1" if spec.policy.auto_approve else "0",
            },
            run_id=run.pk,
            node_id=role_id,
            iteration=it.number,
            tools=toolbox,
            read_only=role.read_only,
            auto_approve=spec.policy.auto_approve,
            network=agent_network(role.network),
            limits=limits_of(spec.limits),
        )
        outcome = stream.keep(call_agent(provider, request, stream, None))
        stream.publish()
    except Cancelled:
        stream.keep_after_cancel()
        return
    except (OperationalError, InterfaceError):
        raise
    except (StepFailed, ProviderError) as exc:
        on_fresh_connection(_failed, it, str(exc), stream)
        return
    except Exception as exc:  # a turn that raises crashes its session
        log.exception("turn %s crashed", it.pk)
        on_fresh_connection(_failed, it, f"{type(exc).__name__}: {exc}", stream)
        return
    changes = None
    if writes and before:
        try:
            if shared:
                changes = git.tree_changes(workdir, before, git.snapshot(workdir, store), store)
            else:
                # The role's own worktree: what the agent left uncommitted is committed on
                # its branch, so the review request carries it.
                git.commit_all(workdir, f"loop run {run.pk}: {role_id} turn {it.number}")
                changes = git.changes(workdir, before)
        except git.GitError as exc:
            log.warning("could not record the %s turn of run %s: %s", role_id, run.pk, exc)
    on_fresh_connection(_done, it, outcome, changes)


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
    dispatch.send_on_commit("tick_machine", run.pk)
