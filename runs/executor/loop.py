"""`loop` nodes: each iteration a full agent session, claimed, recorded and cancellable on
its own. One Celery task per iteration, except that a task whose iteration was quick may
run the next one itself (`run_chain`, the continuation fast path)."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from runs.engine.completion import detect_signal, gate_text, until_field_met
from runs.engine.variables import VariableError, substitute
from runs.models import Gate, Iteration, NodeRun, Run
from runs.providers import registry
from runs.providers.base import AgentRequest, Cancelled, ProviderError

from .agent import StepFailed, call_agent, prepare_prompt
from .context import build_context, run_dirs, step_env
from .process import run_process
from .spec import node_spec, spec_for
from .state import (
    Handoff,
    complete_node,
    fail_node,
    lock_run,
    max_iterations_error,
    next_iteration,
    on_fresh_connection,
    open_gate,
)
from .stream import OutputStream

log = logging.getLogger(__name__)
DEFAULT_IDLE_TIMEOUT_MS = 30 * 60 * 1000


def declared_channels(loop) -> list[str]:
    return [name for name in ("until", "until_field", "until_bash") if getattr(loop, name, None)]


def start_loop(run: Run, spec, node, row: NodeRun) -> None:
    with transaction.atomic():
        run = lock_run(run.pk)
        row.refresh_from_db()
        if run.is_terminal or row.status != NodeRun.Status.RUNNING:
            return
        row.max_iterations = node.loop.max_iterations
        row.lease_expires_at = None
        # Snapshot the prompt template: a paused run keeps the prompt it started with.
        row.state = {**row.state, "prompt_template": node.loop.prompt}
        row.save()
        run.append_event("loop_started", row.node_id, max_iterations=node.loop.max_iterations)
        next_iteration(run, row, 1)


# How long one task may go on running the iterations its own iterations create before it
# hands the next one to the broker, so other runs' messages get a worker in their turn.
CHAIN_SECONDS = 0.5


def run_chain(iteration_id: int) -> None:
    """Run an iteration; while iterations are quick, run the next one in this task too.

    The continuation fast path: no broker hop, no task set-up. Each iteration still goes
    through `run_iteration` (claimed by a conditional UPDATE, its own row and events, a
    cancel or a duplicate delivery stops it there). The next one is sent as a message
    instead when this task has run for CHAIN_SECONDS (a slow agent's iteration alone uses
    that up, so real agents always go through the broker), or if the iteration raised.
    """
    from runs import tasks

    deadline = time.monotonic() + CHAIN_SECONDS
    next_id: int | None = iteration_id
    while next_id is not None:
        with Handoff() as handoff:
            try:
                on_fresh_connection(run_iteration, next_id)
            except BaseException:
                if handoff.iteration_id is not None:
                    tasks.run_iteration.delay(handoff.iteration_id)
                raise
        next_id = handoff.iteration_id
        if next_id is not None and time.monotonic() >= deadline:
            tasks.run_iteration.delay(next_id)
            return


def run_iteration(iteration_id: int) -> None:
    it = (
        Iteration.objects.select_related("node_run", "run__recipe_version", "run__recipe")
        .filter(pk=iteration_id, status=Iteration.Status.PENDING)
        .first()
    )
    if it is None:
        return  # duplicate delivery or cancelled
    run, row = it.run, it.node_run
    if run.is_terminal:
        return
    spec = spec_for(run)
    node = node_spec(spec, row.node_id)
    loop = node.loop
    started = time.monotonic()
    prompt, session_id, prompt_error = "", None, None
    try:
        prev = _previous_output(it)
        ctx = build_context(run, spec, row, loop_user_input=it.feedback, loop_prev_output=prev)
        provider = registry.resolve(node.provider or spec.provider, spec)
        template = row.state.get("prompt_template") or loop.prompt
        prompt = prepare_prompt(substitute(template, ctx), provider, node.output_format)
        threaded = not loop.fresh_context and it.number > 1
        session_id = row.state.get("session_id") if threaded else None
    except (OperationalError, InterfaceError):
        raise
    except Exception as exc:  # noqa: BLE001 - claimed, then reported below like any failure
        prompt_error = exc
    # Claim, record the prompt and log the start in one transaction (one commit, not three:
    # commits are most of the engine's cost per iteration). The prompt was built from reads
    # only, so a duplicate delivery that loses the claim has changed nothing.
    with transaction.atomic():
        locked = lock_run(run.pk, with_recipe=False)
        if locked.is_terminal or not _claim(it, prompt, session_id):
            return
        if prompt_error is None:
            locked.append_event(
                "iteration_started", row.node_id, iteration=it.number, attempt=it.attempts
            )
    stream = OutputStream(Iteration, it.pk, it.attempts, run.pk)
    try:
        if prompt_error is not None:
            raise prompt_error
        workdir, _ = run_dirs(run)
        request = AgentRequest(
            prompt=prompt,
            workdir=str(workdir),
            session_id=session_id,
            model=node.model or spec.model,
            output_schema=node.output_format,
            idle_timeout=(node.idle_timeout or DEFAULT_IDLE_TIMEOUT_MS) / 1000,
            env=step_env(run, ctx),
            run_id=run.pk,
            node_id=row.node_id,
            iteration=it.number,
        )
        outcome = call_agent(provider, request, stream, node.output_format)
        stream.publish()
        fired = []
        if loop.until and detect_signal(outcome.raw, loop.until):
            fired.append("until")
        if loop.until_field and until_field_met(outcome.payload, loop.until_field):
            fired.append("until_field")
        if loop.until_bash and not fired and _until_bash(loop.until_bash, ctx, run, stream):
            fired.append("until_bash")
    except Cancelled:
        return
    except (OperationalError, InterfaceError):
        raise  # the database is unreachable, not the agent at fault: the sweep re-runs it
    except (StepFailed, VariableError, ProviderError) as exc:
        on_fresh_connection(_iteration_failed, it, str(exc), stream.text, started)
        return
    except Exception as exc:  # an iteration that raises fails the node at once
        log.exception("iteration %s crashed", it.pk)
        error = f"{exc.__class__.__name__}: {exc}"
        on_fresh_connection(_iteration_failed, it, error, stream.text, started)
        return
    on_fresh_connection(_iteration_done, it, node, outcome, fired, stream, started)


def _claim(it: Iteration, prompt: str, session_id: str | None) -> bool:
    """Take a pending iteration (inside the run's lock). False if someone else has it.

    One conditional UPDATE: only a row still pending changes, so of two deliveries (or a
    delivery and a cancel) exactly one wins; RETURNING gives the attempt number it got."""
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Iteration._meta.db_table} SET status = %s, attempts = attempts + 1, "
            "started_at = %s, lease_expires_at = %s, prompt = %s, session_id = %s "
            "WHERE id = %s AND status = %s RETURNING attempts",
            [
                Iteration.Status.RUNNING,
                connection.ops.adapt_datetimefield_value(now),
                connection.ops.adapt_datetimefield_value(
                    now + timedelta(seconds=settings.LOOP_LEASE_SECONDS)
                ),
                prompt,
                session_id or "",
                it.pk,
                Iteration.Status.PENDING,
            ],
        )
        claimed = cursor.fetchone()
    if claimed is None:
        return False
    it.attempts = claimed[0]
    it.status = Iteration.Status.RUNNING
    return True


def _previous_output(it: Iteration) -> str:
    """$LOOP_PREV_OUTPUT: the previous iteration's cleaned output; empty on the first
    iteration and on the first one after a gate."""
    if it.number <= 1 or it.after_gate:
        return ""
    prev = (
        Iteration.objects.filter(
            node_run=it.node_run_id, generation=it.generation, number=it.number - 1
        )
        .values_list("output", flat=True)
        .order_by()
        .first()
    )
    return prev or ""


def _until_bash(script: str, ctx, run, stream: OutputStream) -> bool:
    workdir, _ = run_dirs(run)
    command = substitute(script, ctx, shell=True)
    result = run_process(
        ["bash", "-c", command],
        cwd=str(workdir),
        env=step_env(run, ctx),
        on_chunk=lambda chunk: stream(""),
    )
    return result.exit_code == 0


def _finish(it: Iteration, status: str, started: float, **fields) -> bool:
    fields.update(
        status=status,
        finished_at=timezone.now(),
        duration_ms=int((time.monotonic() - started) * 1000),
        lease_expires_at=None,
    )
    finished = Iteration.objects.filter(
        pk=it.pk, status=Iteration.Status.RUNNING, attempts=it.attempts
    ).update(**fields)
    if finished:  # keep the instance in step without reading the row back
        for name, value in fields.items():
            setattr(it, name, value)
    return bool(finished)


def _iteration_failed(it: Iteration, error: str, raw: str, started: float) -> None:
    with transaction.atomic():
        run = lock_run(it.run_id)
        if run.is_terminal or not _finish(
            it, Iteration.Status.FAILED, started, error=error, raw_output=raw
        ):
            return
        row = NodeRun.objects.get(pk=it.node_run_id)
        run.append_event("iteration_failed", row.node_id, iteration=it.number, error=error)
        fail_node(run, row, f"iteration {it.number} failed: {error}")


def _iteration_done(it: Iteration, node, outcome, fired: list[str], stream, started: float) -> None:
    loop = node.loop
    result = outcome.result
    with transaction.atomic():
        run = lock_run(it.run_id, with_recipe=False)
        status = Iteration.Status.TIMED_OUT if result.timed_out else Iteration.Status.COMPLETED
        if run.is_terminal or not _finish(
            it,
            status,
            started,
            raw_output=outcome.raw,
            output=outcome.text,
            structured=outcome.payload,
            channels=fired,
            session_id=result.session_id or "",
            tokens_in=result.tokens_in,
            tokens_out=result.tokens_out,
            cost_usd=result.cost_usd,
        ):
            return
        row = NodeRun.objects.select_for_update().get(pk=it.node_run_id)
        row.output = outcome.text
        row.structured = outcome.payload
        row.state = {**row.state, "session_id": result.session_id or row.state.get("session_id")}
        # Not saved here: every outcome of settle_loop saves the row (one write, not two).
        run.append_event(
            "iteration_completed",
            row.node_id,
            iteration=it.number,
            channels=fired,
            timed_out=result.timed_out,
            duration_ms=it.duration_ms,
        )
        settle_loop(run, row, loop, it, fired)


def settle_loop(run: Run, row: NodeRun, loop, it: Iteration, fired: list[str]) -> None:
    """After an iteration (of a loop or a loop_group): complete, gate, fail or go on."""
    if fired and (not loop.interactive or loop.signal_completes):
        complete_node(run, row, it.output, it.structured, iterations=it.number, channels=fired)
    elif not fired and it.number >= loop.max_iterations:
        fail_node(run, row, max_iterations_error(row.node_id, loop))
    elif loop.interactive:
        message = gate_text(
            fired=fired,
            declared=declared_channels(loop),
            output=it.output,
            gate_message=loop.gate_message or "",
        )
        open_gate(run, row, kind=Gate.Kind.LOOP, message=message, iteration=it, fired=fired)
    else:
        next_iteration(run, row, it.number + 1)
