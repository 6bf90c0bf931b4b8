"""`loop` nodes: one Celery task per iteration, each a full agent session."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
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
    complete_node,
    fail_node,
    lock_run,
    max_iterations_error,
    next_iteration,
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


def run_iteration(iteration_id: int) -> None:
    claimed = Iteration.objects.filter(pk=iteration_id, status=Iteration.Status.PENDING).update(
        status=Iteration.Status.RUNNING,
        attempts=F("attempts") + 1,
        started_at=timezone.now(),
        lease_expires_at=timezone.now() + timedelta(seconds=settings.LOOP_LEASE_SECONDS),
    )
    if not claimed:
        return  # duplicate delivery or cancelled
    it = Iteration.objects.select_related("node_run", "run__recipe_version", "run__recipe").get(
        pk=iteration_id
    )
    run, row = it.run, it.node_run
    if run.is_terminal:
        return
    spec = spec_for(run)
    node = node_spec(spec, row.node_id)
    loop = node.loop
    stream = OutputStream(Iteration, it.pk, it.attempts, run.pk)
    started = time.monotonic()
    try:
        prev = _previous_output(it)
        ctx = build_context(run, spec, row, loop_user_input=it.feedback, loop_prev_output=prev)
        provider = registry.resolve(node.provider or spec.provider, spec)
        template = row.state.get("prompt_template") or loop.prompt
        prompt = prepare_prompt(substitute(template, ctx), provider, node.output_format)
        threaded = not loop.fresh_context and it.number > 1
        session_id = row.state.get("session_id") if threaded else None
        Iteration.objects.filter(pk=it.pk).update(prompt=prompt, session_id=session_id or "")
        with transaction.atomic():
            lock_run(run.pk).append_event(
                "iteration_started", row.node_id, iteration=it.number, attempt=it.attempts
            )
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
        fired = []
        if loop.until and detect_signal(outcome.raw, loop.until):
            fired.append("until")
        if loop.until_field and until_field_met(outcome.payload, loop.until_field):
            fired.append("until_field")
        if loop.until_bash and not fired and _until_bash(loop.until_bash, ctx, run, stream):
            fired.append("until_bash")
    except Cancelled:
        return
    except (StepFailed, VariableError, ProviderError) as exc:
        _iteration_failed(it, str(exc), stream.text, started)
        return
    except Exception as exc:  # an iteration that raises fails the node at once
        log.exception("iteration %s crashed", it.pk)
        _iteration_failed(it, f"{exc.__class__.__name__}: {exc}", stream.text, started)
        return
    _iteration_done(it, node, outcome, fired, stream, started)


def _previous_output(it: Iteration) -> str:
    """$LOOP_PREV_OUTPUT: the previous iteration's cleaned output; empty on the first
    iteration and on the first one after a gate."""
    if it.number <= 1 or it.after_gate:
        return ""
    prev = Iteration.objects.filter(
        node_run=it.node_run, generation=it.generation, number=it.number - 1
    ).first()
    return prev.output if prev else ""


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
    now = timezone.now()
    return bool(
        Iteration.objects.filter(
            pk=it.pk, status=Iteration.Status.RUNNING, attempts=it.attempts
        ).update(
            status=status,
            finished_at=now,
            duration_ms=int((time.monotonic() - started) * 1000),
            lease_expires_at=None,
            **fields,
        )
    )


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
        run = lock_run(it.run_id)
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
        it.refresh_from_db()
        row.output = outcome.text
        row.structured = outcome.payload
        row.state = {**row.state, "session_id": result.session_id or row.state.get("session_id")}
        row.save()
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
