"""A worker executes a driven recipe's host node: the host's turn, with its loop tools.

Called by runs.executor.handover.start_node once the node is claimed. The turn is an Iteration
of the host's row; the node's lease is kept through one NodeLease by a helper thread while
the turn runs and by every sign of life (the host's output, a tool call, a pipeline step's
output). When the turn ends, a loop
still open is closed (completed with its last output, or failed if the turn failed), the
agents' rows end with the host's, and the node completes or fails: the scheduler derives
the run's status as for any recipe.

A worker lost mid-turn: the sweep gives the node back, and the next execution closes what
the lost one left open (as failed) and starts a new turn; nothing is replayed.

A fork's first turn (loops/driven/forking.py) runs the forked loop's next iteration before the host
is called, and tells the host where it is.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Max

from runs import budget
from runs.executor.agent import StepFailed, prepare_prompt, request_for, run_call
from runs.executor.context import build_context
from runs.executor.lease import keep_lease
from runs.executor.spec import SpecError, spec_for
from runs.executor.state import lock_run, on_fresh_connection
from runs.executor.stream import NodeLease, OutputStream
from runs.models import Iteration, NodeRun, Run
from runs.providers import registry
from runs.providers.base import Cancelled, ProviderError
from runs.providers.command import CommandProvider

from . import forking
from .driver import LoopDriver
from .hooks import HookError, Hooks
from .models import Loop
from .prompts import host_prompt
from .spec import PIPELINE_STEP

log = logging.getLogger(__name__)
LOST = "the worker running the host was lost; its turn is not replayed"


def execute(run: Run, row: NodeRun) -> None:
    try:
        spec = spec_for(run)
    except SpecError as exc:
        _fail_node(row, f"recipe version does not load: {exc}")
        return
    provider, told, prompt, problem = _host_prompt(run, spec)
    _close_what_a_lost_worker_left(run, row, spec)
    turn = _begin_turn(run, row, prompt)
    if turn is None:
        return
    if problem is not None:
        on_fresh_connection(_turn_failed, row, turn, problem, None)
        return
    lease = NodeLease(row.pk, row.attempts)
    ctx = build_context(run, spec, row)
    driver = LoopDriver(run=run, spec=spec, row=row, host_iteration=turn, lease=lease, ctx=ctx)
    # The node's lease is kept by a helper thread for as long as this process lives (and
    # by every sign of life): a host that is busy but quiet, or a worker slowed by a
    # dropped connection or a loaded machine, is not taken for lost and run twice.
    with keep_lease(driver.still_ours):
        if forking.pending(row):  # a fork's first turn: its loop goes on first
            prompt = _after_the_fork(driver, provider, told)
        if prompt is not None:
            _host_turn(driver, provider, prompt)


def _host_prompt(run: Run, spec) -> tuple:
    """The host's provider, what it is told, and its prompt (what it is told, with the
    answer's schema for a provider that does not enforce one); or the problem that keeps
    it from being called (its provider cannot be resolved)."""
    host = spec.host_agent
    try:
        provider = registry.resolve(host.provider or spec.provider, spec)
        shell = getattr(_unwrapped(provider), "command", "") if _is_command(provider) else ""
        told = host_prompt(spec, run, shell_command=shell)
        return provider, told, prepare_prompt(told, provider, host.output_schema), None
    except ProviderError as exc:
        return None, "", "", str(exc)


def _after_the_fork(driver: LoopDriver, provider, told: str) -> str | None:
    """A fork's first turn (loops/driven/forking.py): the forked loop's next iteration runs
    first, then the host is told where it is. Its prompt, or None when the run was
    cancelled meanwhile."""
    turn = driver.host_iteration
    try:
        told += "\n## Where you are\n" + forking.go_on(driver, driver.row, turn) + "\n"
    except Cancelled:
        driver.close_open(failed=True, error="the run was cancelled")
        return None
    prompt = prepare_prompt(told, provider, driver.spec.host_agent.output_schema)
    Iteration.objects.filter(pk=turn.pk).update(prompt=prompt)
    return prompt


def _host_turn(driver: LoopDriver, provider, prompt: str) -> None:
    """The host's call, its loop tools at hand; what it left open ends with it."""
    run, row, turn, spec = driver.run, driver.row, driver.host_iteration, driver.spec
    stream = OutputStream(Iteration, turn.pk, turn.attempts, run.pk, lease=False)

    def on_chunk(chunk: str) -> None:
        stream(chunk)
        driver.renew()

    host = spec.host_agent
    request = request_for(
        run,
        host,
        prompt,
        spec=spec,
        node_id=row.node_id,
        iteration=turn.number,
        schema=host.output_schema,
        ctx=driver.ctx,
        tools=driver.toolbox,
    )
    try:
        outcome = run_call(provider, request, stream, on_chunk=on_chunk)
    except Cancelled:
        driver.close_open(failed=True, error="the run was cancelled")
        return
    except (StepFailed, ProviderError) as exc:
        _host_failed(driver, str(exc), stream)
        return
    except Exception as exc:  # the host's crash fails its node, with the reason
        log.exception("driven host of run %s crashed", run.pk)
        _host_failed(driver, f"{type(exc).__name__}: {exc}", stream)
        return
    if outcome.result.timed_out:
        error = f"the host went silent for {request.idle_timeout:.0f}s (idle timeout)"
        driver.close_open(failed=True, error=error)
        on_fresh_connection(_turn_failed, row, turn, error, stream, True)
    elif Run.objects.filter(pk=run.pk, status__in=Run.TERMINAL).exists():
        # Cancelled while the host was between calls and wrote nothing: its loop ends
        # with the run, not as the host's satisfied result.
        driver.close_open(failed=True, error="the run was cancelled")
    else:
        driver.close_open(failed=False)
        on_fresh_connection(_turn_done, row, turn, outcome)


def _host_failed(driver: LoopDriver, error: str, stream: OutputStream) -> None:
    driver.close_open(failed=True, error=f"the host's turn failed: {error}")
    on_fresh_connection(_turn_failed, driver.row, driver.host_iteration, error, stream)


def _unwrapped(provider):
    return getattr(provider, "inner", provider)  # worktree.RecordingDiffs wraps providers


def _is_command(provider) -> bool:
    return isinstance(_unwrapped(provider), CommandProvider)


def _close_what_a_lost_worker_left(run: Run, row: NodeRun, spec) -> None:
    """An earlier execution of this node died: its loops end failed, its calls with it."""
    kept = (forking.pending(row) or {}).get("loop")  # a fork's loop, not yet gone on
    for loop in Loop.objects.filter(run=run, status=Loop.Status.OPEN).exclude(pk=kept):
        try:
            Hooks(dict(spec.loop.hooks)).call(
                "on_finish", loopId=loop.pk, status="failed", iterations=loop.iteration_count
            )
        except HookError as exc:
            log.warning("on_finish of loop %s: %s", loop.pk, exc)
        with transaction.atomic():
            locked = lock_run(run.pk, with_recipe=False)
            loop.close(locked, Loop.Status.FAILED, error=LOST)
    with transaction.atomic():
        locked = lock_run(run.pk, with_recipe=False)
        for it in Iteration.objects.filter(run=run, status=Iteration.Status.RUNNING):
            it.fail(locked, LOST, output=it.raw_output)


def _begin_turn(run: Run, row: NodeRun, prompt: str) -> Iteration | None:
    with transaction.atomic():
        locked = lock_run(run.pk, with_recipe=False)
        row.refresh_from_db()
        if locked.is_terminal or row.status != NodeRun.Status.RUNNING:
            return None
        # Between turns, like any loop: past a limit the node waits for a resume.
        if not budget.allows_next_iteration(locked, row, {"action": "node"}):
            return None
        done = row.iterations.filter(generation=row.generation).aggregate(n=Max("number"))["n"]
        # Run here, under the node's lease (the turn holds none of its own).
        turn = row.start_iteration(locked, (done or 0) + 1, here=True)
        if not turn.start(locked, prompt, leased=False):
            return None
        return turn


def _turn_done(row: NodeRun, turn: Iteration, outcome) -> None:
    with transaction.atomic():
        run = lock_run(row.run_id, with_recipe=False)
        if run.is_terminal or not turn.complete(run, outcome):
            return
        _end_agent_rows(run, row)
        row.refresh_from_db()
        if budget.HOLD in row.state:
            return  # stopped by the run's budget during this turn: it waits for a resume
        loops = Loop.objects.filter(host_iteration=turn).count()
        kept = {
            "output_file": outcome.fields.get("output_file", ""),
            "output_bytes": outcome.fields.get("output_bytes"),
        }
        row.complete(
            run, outcome.text, outcome.payload, attempt=row.attempts, columns=kept, loops=loops
        )


def _turn_failed(
    row: NodeRun,
    turn: Iteration,
    error: str,
    stream: OutputStream | None,
    timed_out: bool = False,
) -> None:
    raw, fields = (stream.text, stream.fields()) if stream is not None else ("", {})
    with transaction.atomic():
        run = lock_run(row.run_id, with_recipe=False)
        if run.is_terminal or not turn.fail(
            run, error, timed_out=timed_out, raw_output=raw, output=raw, **fields
        ):
            return
        _end_agent_rows(run, row)
        row.refresh_from_db()
        row.fail(run, f"the host's turn failed: {error}", attempt=row.attempts)


def _end_agent_rows(run: Run, host_row: NodeRun) -> None:
    """The agents' rows end with the host's turn: each call they made says how it went."""
    for agent in NodeRun.objects.filter(run=run, kind=PIPELINE_STEP, status__in=NodeRun.UNFINISHED):
        agent.complete(run, agent.output, agent.structured)


def _fail_node(row: NodeRun, error: str) -> None:
    with transaction.atomic():
        run = lock_run(row.run_id)
        row.refresh_from_db()
        if not run.is_terminal:
            row.fail(run, error, attempt=row.attempts)
