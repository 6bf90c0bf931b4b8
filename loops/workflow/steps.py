"""A YAML workflow's nodes, once the kernel has claimed one (runs.executor.handover):
run bash, script and prompt steps, open approval gates, cancel, set up loops, loop_groups
and child runs."""

from __future__ import annotations

import time

from django.conf import settings
from django.db import transaction

from runs.actor import ENGINE
from runs.engine.deadlines import GateDeadline
from runs.engine.variables import VariableError, substitute, substitute_shell
from runs.executor.agent import StepFailed, prepare_prompt, request_for, run_call
from runs.executor.context import build_context, step_env, step_sandbox
from runs.executor.handover import fail_node
from runs.executor.spec import node_spec, spec_for
from runs.executor.state import lock_run
from runs.executor.stream import FLUSH_SECONDS, OutputStream
from runs.models import Gate, NodeRun, Run
from runs.models.agent_call import record_call
from runs.providers import registry
from runs.providers.base import Cancelled, ProviderError
from runs.sandbox import run_process

from . import group as group_exec
from . import loop as loop_exec
from . import subrun
from .script import run_script


def start(run: Run, row: NodeRun) -> None:
    """A YAML workflow's node, claimed (WorkflowKind registers it for each of the
    workflow's node kinds)."""
    spec = spec_for(run)  # cached per version: the kernel's start_node has just read it
    node = node_spec(spec, row.node_id)
    if node.kind in NodeRun.STEPS:
        _run_step(run, spec, node, row)
    elif node.kind == NodeRun.Kind.WORKFLOW:
        subrun.start_children(run, spec, node, row)
    elif node.kind == NodeRun.Kind.LOOP:
        loop_exec.start_loop(run, spec, node, row)
    elif node.kind == NodeRun.Kind.LOOP_GROUP:
        group_exec.start_group(run, spec, node, row)
    elif node.kind == NodeRun.Kind.APPROVAL:
        with transaction.atomic():
            run = lock_run(run.pk)
            row.refresh_from_db()
            decisions = [{"id": d.id, "label": d.label} for d in node.approval.decisions]
            try:
                message = substitute(node.approval.message, build_context(run, spec, row))
            except VariableError as exc:
                row.fail(run, f"approval message: {exc}")
                return
            row.pause(
                run,
                kind=Gate.Kind.APPROVAL,
                message=message,
                decisions=decisions,
                deadline=GateDeadline.of(node.approval),
            )
    elif node.kind == NodeRun.Kind.CANCEL:
        with transaction.atomic():
            run = lock_run(run.pk)
            row.refresh_from_db()
            row.complete(run, node.cancel or "")
            run.cancel(ENGINE, f"cancelled by node '{row.node_id}'", error=node.cancel or "")


def retry_delay_seconds(node) -> float:
    """A step's retry delay, bounded: a worker waiting on it holds a task slot."""
    if not node.retry:
        return 0.0
    return min(node.retry.delay_ms / 1000, settings.LOOP_MAX_RETRY_DELAY_SECONDS)


def _wait_keeping_lease(stream: OutputStream, seconds: float) -> None:
    """Sleep before a retry while renewing the lease, so the sweep does not take the step
    back; raises Cancelled if the run was cancelled meanwhile."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, FLUSH_SECONDS))
        stream.flush()


def _run_step(run: Run, spec, node, row: NodeRun) -> None:
    attempts = node.retry.max_attempts if node.retry else 1
    delay = retry_delay_seconds(node)
    stream = OutputStream(NodeRun, row.pk, row.attempts, run.pk, field="output")
    for attempt in range(1, attempts + 1):
        stream.reset()
        try:
            output, structured, extra, outcome = _execute(run, spec, node, row, stream)
        except Cancelled:
            return
        except (StepFailed, VariableError, ProviderError) as exc:
            if attempt < attempts:
                stream(f"\n[attempt {attempt} of {attempts} failed; retrying in {delay:g}s]\n")
                try:
                    _wait_keeping_lease(stream, delay)
                except Cancelled:
                    return
                continue
            fail_node(row, str(exc), stream)
            return
        with transaction.atomic():
            locked = lock_run(run.pk)
            if locked.is_terminal:
                return
            row.refresh_from_db()
            printed = {"state": {**row.state, **extra}, "stderr": stream.stderr, **stream.fields()}
            owned = row.status == NodeRun.Status.RUNNING and row.attempts == stream.attempt
            if outcome is not None and owned:  # the run's lock keeps it so until we commit
                record_call(
                    locked, row.node_id, row.iteration or None, outcome.result, outcome.provider
                )
            if row.complete(locked, output, structured, attempt=stream.attempt, columns=printed):
                if "." in row.node_id and extra.get("session_id"):
                    group_exec.remember_session(row, extra["session_id"])
        return


def _execute(run: Run, spec, node, row: NodeRun, stream: OutputStream):
    if node.kind == NodeRun.Kind.SCRIPT:
        return (*run_script(run, spec, node, row, stream), None)  # no agent call to record
    ctx = build_context(run, spec, row)
    if node.kind == NodeRun.Kind.BASH:
        script, values = substitute_shell(node.bash, ctx, node.start_checks)
        timeout = (node.timeout / 1000) if node.timeout else None
        result = run_process(
            ["bash", "-c", script],
            sandbox=step_sandbox(run, spec, node),
            env={**step_env(run, ctx), **values},
            on_chunk=stream,
            on_stderr=stream.on_stderr,  # $node.output is stdout (docs/recipes.md)
            timeout=timeout,
        )
        stream.publish()
        if result.timed_out:
            raise StepFailed(f"bash step timed out after {timeout:.0f}s")
        if result.exit_code != 0:
            # The output is the node's (shown once, there); the error says what happened.
            raise StepFailed(f"bash exited with status {result.exit_code}")
        # What later steps read as $node.output is what the row keeps (LOOP_MAX_OUTPUT_BYTES).
        return stream.keep_text(result.output.rstrip("\n")), None, {"script": script}, None
    provider = registry.resolve(node.provider or _group_default(spec, row, "provider"), spec)
    prompt = prepare_prompt(substitute(node.prompt, ctx), provider, node.output_format)
    request = request_for(
        run,
        node,
        prompt,
        spec=spec,
        model=node.model or _group_default(spec, row, "model"),
        node_id=row.node_id,
        iteration=row.iteration,
        schema=node.output_format,
        session_id=_group_session(spec, row),
        ctx=ctx,
    )
    outcome = run_call(provider, request, stream)
    result = outcome.result
    extra = {
        "prompt": prompt,
        "raw": outcome.raw,
        "session_id": result.session_id,
        # A body step of a loop_group has no Iteration row: its usage is kept here.
        "tokens_in": result.tokens_in,
        "tokens_out": result.tokens_out,
        "cost_usd": str(result.cost_usd) if result.cost_usd is not None else None,
        "provider": getattr(provider, "name", "") or "default",
    }
    return outcome.text, outcome.payload, extra, outcome


def _group_default(spec, row: NodeRun, attr: str):
    if "." not in row.node_id:
        return None
    return getattr(spec.node(row.node_id.split(".", 1)[0]), attr, None)


def _group_session(spec, row: NodeRun) -> str | None:
    """Body AI nodes of a loop_group thread their sessions across iterations unless
    fresh_context is set; the session cursor lives on the group's row."""
    if "." not in row.node_id or row.iteration <= 1:
        return None
    group_id, body_id = row.node_id.split(".", 1)
    if spec.node(group_id).loop_group.fresh_context:
        return None
    group = NodeRun.objects.get(run_id=row.run_id, node_id=group_id, iteration=0)
    return (group.state.get("sessions") or {}).get(body_id)
