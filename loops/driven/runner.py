"""A worker executes a driven recipe's host node: the host's turn, with its loop tools.

Called by runs.executor.handover.start_node once the node is claimed. The turn is an Iteration
of the host's row; the node's lease is kept through one NodeLease by a helper thread while
the turn runs and by every sign of life (the host's output, a tool call, a pipeline step's
output). When the turn ends, a loop
still open is closed (completed with its last output, or failed if the turn failed), the
agents' rows end with the host's, and the node completes or fails: the scheduler derives
the run's status as for any recipe.

A worker lost mid-turn: the sweep gives the node back, and the next execution's turn goes
on from the lost one's last durable point (`_begin_turn` takes over its loops and its record
of tool calls, loops/driven/models.py: HostCall). The loop iteration that was in flight runs
again, its finished steps kept (LoopDriver.go_on_after_loss); the host is told what the lost
attempt did (prompts.lost_attempt_note), and the calls it makes again in the same order are
answered from the record, not run again. Nothing else is run twice.

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
from .models import HostCall, Loop
from .prompts import host_prompt, lost_attempt_note
from .spec import PIPELINE_STEP

log = logging.getLogger(__name__)
LOST = "the worker running the host was lost while this call ran; the host's next turn goes on"
LOST_TURN = "the worker running the host was lost; turn {number} goes on from what this one did"


def execute(run: Run, row: NodeRun) -> None:
    try:
        spec = spec_for(run)
    except SpecError as exc:
        _fail_node(row, f"recipe version does not load: {exc}")
        return
    provider, told, prompt, problem = _host_prompt(run, spec)
    turn, resumed = _begin_turn(run, row, prompt)
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
        if resumed:  # a lost worker's turn: it goes on from its last durable point
            told = _after_the_loss(driver, told)
            prompt = None if told is None else _retold(driver, provider, told)
        if prompt is not None and forking.pending(row):  # a fork's first turn: its loop first
            prompt = _after_the_fork(driver, provider, told)
        if prompt is not None:
            _host_turn(driver, provider, prompt)


def _host_prompt(run: Run, spec) -> tuple:
    """The host's provider, what it is told, and its prompt (what it is told, with the
    answer's schema for a provider that does not enforce one); or the problem that keeps
    it from being called (its provider cannot be resolved)."""
    host = spec.host_agent
    try:
        provider = registry.resolve(host.provider or spec.provider, spec, run)
        shell = getattr(_unwrapped(provider), "command", "") if _is_command(provider) else ""
        told = host_prompt(spec, run, shell_command=shell)
        return provider, told, prepare_prompt(told, provider, host.output_schema), None
    except ProviderError as exc:
        return None, "", "", str(exc)


def _after_the_loss(driver: LoopDriver, told: str) -> str | None:
    """A turn resumed after a lost worker: the loop iteration in flight runs again, then the
    host is told what the lost attempt did. What it is told, or None when the run was
    cancelled meanwhile."""
    try:
        done = driver.go_on_after_loss()
    except Cancelled:
        driver.close_open(failed=True, error="the run was cancelled")
        return None
    return told + "\n" + lost_attempt_note(done, driver.open_loop())


def _retold(driver: LoopDriver, provider, told: str) -> str:
    """The turn's prompt, now that it is told more than when it began."""
    prompt = prepare_prompt(told, provider, driver.spec.host_agent.output_schema)
    Iteration.objects.filter(pk=driver.host_iteration.pk).update(prompt=prompt)
    return prompt


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
    return _retold(driver, provider, told)


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


def _begin_turn(run: Run, row: NodeRun, prompt: str) -> tuple[Iteration | None, bool]:
    """The host's new turn, and whether it goes on from turns a lost worker left running
    (their loops and record of tool calls are now this turn's; what ran under them and
    was still running ended failed, to run again)."""
    with transaction.atomic():
        locked = lock_run(run.pk, with_recipe=False)
        row.refresh_from_db()
        if locked.is_terminal or row.status != NodeRun.Status.RUNNING:
            return None, False
        # Between turns, like any loop: past a limit the node waits for a resume.
        if not budget.allows_next_iteration(locked, row, {"action": "node"}):
            return None, False
        lost = list(
            row.iterations.filter(status=Iteration.Status.RUNNING).values_list("pk", flat=True)
        )
        done = row.iterations.filter(generation=row.generation).aggregate(n=Max("number"))["n"]
        # Run here, under the node's lease (the turn holds none of its own).
        turn = row.start_iteration(locked, (done or 0) + 1, here=True)
        for it in Iteration.objects.filter(run=run, status=Iteration.Status.RUNNING).exclude(
            pk=turn.pk
        ):
            error = LOST_TURN.format(number=turn.number) if it.pk in lost else LOST
            it.fail(locked, error, output=it.raw_output)
        if not turn.start(locked, prompt, leased=False):
            return None, False
        Loop.objects.filter(host_iteration__in=lost).update(host_iteration=turn)
        HostCall.objects.filter(host_iteration__in=lost).update(host_iteration=turn)
        return turn, bool(lost)


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
