"""Sessions of a step machine's roles, and the turns sent to them (the caller holds the
run's lock; the turns themselves run on workers, `turns.run_turn`).

A session is a node row named after its role (kind `session`, one generation per session):
running while it can be prompted, failed when its agent crashed, completed when it was
replaced or the run ended. Each turn is an Iteration of that row, sent through the kernel
(`NodeRun.start_iteration` → `run_iteration`), which also starts a new session's row.
The row's state keeps the agent's session id (so the next turn resumes it), the working
directory and the branch.
"""

from __future__ import annotations

from django.utils import timezone

from loops.stepmachine.spec import SESSION_KIND
from runs import budget
from runs.models import Iteration, NodeRun

from . import git
from .context import run_folders, turn_prompt
from .machine import busy, latest_session, live_session


class StepFailed(Exception):
    """The step cannot be done; the run fails with this message."""


class Blocked(Exception):
    """A limit stops the run (it becomes blocked) with this message."""


class BudgetStopped(Exception):
    """The run's budget is spent: the run stopped (budget_exceeded) before this turn, and
    the machine waits at this step until an operator raises the budget and resumes."""


def send_prompt(ctx, role_id: str, prompt: str, *, branch: str | None, create: bool):
    """session.create (`create`) or session.prompt. Returns a reason to wait, or None."""
    run, spec = ctx.run, ctx.spec
    role = spec.roles[role_id]
    live = live_session(run, role_id)
    if live is not None and busy(live):
        return f"waiting for the {role_id} session to finish its current turn"
    # Checked before anything opens or replaces a session, on the machine: a stop holds
    # the machine at this step, and resuming re-queues it to take this step again.
    if not budget.allows_next_iteration(run, ctx.row, {"action": "node"}):
        raise BudgetStopped()
    if not create:
        if live is None:
            last = latest_session(run, role_id)
            why = f"its last session {last.status}" if last else "it has none"
            raise StepFailed(f"session.prompt: the {role_id} role has no live session ({why})")
        send_turn(ctx, live, prompt, reused=True)
        return None
    if live is not None and role.session_reuse and branch in (None, live.state.get("branch")):
        if role.isolation == "project" and branch:
            _checkout(ctx, branch)
        send_turn(ctx, live, prompt, reused=True)
        return None
    if live is not None:
        why = "session_reuse is off" if not role.session_reuse else f"branch {branch} asked"
        live.complete(run, f"replaced by a fresh session ({why})", reason="replaced")
    running = NodeRun.objects.filter(run=run, kind=SESSION_KIND, status=NodeRun.Status.RUNNING)
    limit = spec.policy.max_sessions
    if running.count() >= limit:
        names = ", ".join(sorted(running.values_list("node_id", flat=True)))
        raise Blocked(f"max_sessions ({limit}) reached: live sessions of {names}")
    session = _open(ctx, role_id, branch)
    send_turn(ctx, session, prompt, reused=False)
    return None


def _checkout(ctx, branch: str) -> None:
    try:
        git.checkout(ctx.repository, branch)
    except git.GitError as exc:
        raise StepFailed(str(exc)) from None


def _open(ctx, role_id: str, branch: str | None) -> NodeRun:
    run, spec, state = ctx.run, ctx.spec, ctx.state
    role = spec.roles[role_id]
    previous = latest_session(run, role_id)
    generation = (previous.generation + 1) if previous else 0  # shown as session #1
    repository = ctx.repository
    default_workdir = str(run_folders(run)[0])
    workdir, used_branch, started_at_commit = repository or default_workdir, None, None
    if role.isolation == "worktree":
        if not repository:
            raise StepFailed(
                f"role {role_id} works in a git worktree (isolation: worktree), but the run "
                "has no git repository: start it on one"
            )
        used_branch = branch or f"loop/{run.pk}/{role_id}-r{state.round}"
        path = git.role_worktree_path(run.pk, role_id, state.round, generation + 1)
        base = (previous.state.get("branch") if previous else None) or "HEAD"
        try:
            git.add_worktree(repository, path, used_branch, base=base)
            # Where the worktree began: a fork from one of its turns before any commit
            # starts the fork's own worktree here (loops/stepmachine/forking.py).
            started_at_commit = git.head(path)
        except git.GitError as exc:
            raise StepFailed(str(exc)) from None
        workdir = str(path)
    elif role.isolation == "project" and repository:
        if branch:
            _checkout(ctx, branch)
        used_branch = git.current_branch(repository) or None
    elif branch and role.isolation == "project":
        raise StepFailed(f"branch {branch!r} asked, but the run has no git repository")
    # Pending until its first turn starts it (`send_turn`: NodeRun.start_iteration).
    session = NodeRun.objects.create(
        run=run,
        node_id=role_id,
        kind=SESSION_KIND,
        generation=generation,
        started_at=timezone.now(),
        state={
            "workdir": workdir,
            "branch": used_branch,
            "isolation": role.isolation,
            "mode": role.mode,
            "read_only": role.read_only,
            "round": state.round,
            "session_id": "",
            **({"base": started_at_commit} if started_at_commit else {}),
        },
    )
    run.append_event(
        "session_started",
        role_id,
        session=generation + 1,
        isolation=role.isolation,
        branch=used_branch or "",
        replaces=previous.generation + 1 if previous else None,
    )
    return session


def send_turn(ctx, session: NodeRun, prompt: str, *, reused: bool, feedback: str = "") -> Iteration:
    """The step's prompt as the session's next turn. The machine's position as it sends it
    is logged with it (`turn_sent`): a fork from this turn goes on from there
    (loops/stepmachine/forking.py)."""
    run, state = ctx.run, ctx.state
    number = session.iteration_count + 1
    full = turn_prompt(ctx.spec, session.node_id, prompt, session.state["workdir"])
    # send_prompt (or the fork) checked the budget, on the machine
    it = session.start_iteration(
        run, number, feedback=feedback, after_gate=bool(feedback), checked=True
    )
    if it is None:
        raise RuntimeError(f"session {session.node_id} of run {run.pk} has ended")
    Iteration.objects.filter(pk=it.pk).update(prompt=full)
    if reused:
        run.append_event(
            "session_reused", session.node_id, session=session.generation + 1, turn=number
        )
    run.append_event(
        "turn_sent",
        session.node_id,
        session=session.generation + 1,
        turn=number,
        from_step=state.current,
        round=state.round,
        ticks=state.ticks,
        status=state.status,
        last_error=state.last_error,
    )
    return it
