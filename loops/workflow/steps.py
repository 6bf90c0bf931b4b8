"""A YAML workflow's nodes, once the kernel has claimed one (runs.executor.handover):
run bash, script and prompt steps, open approval gates, cancel, set up loops, loop_groups
and child runs.

A prompt or command step (a loop_group's body steps too) is a one-iteration node: its agent
call is an Iteration of its row (each attempt claims it again), which keeps the prompt, the
answer, the usage and the timing as every agent call's does; the row keeps the answer later
steps read ($node.output). Usage has that one place (runs.budget.usage_totals)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from runs.actor import ENGINE
from runs.engine.deadlines import GateDeadline
from runs.engine.variables import VariableError, substitute, substitute_shell
from runs.executor.agent import StepFailed, prepare_prompt, request_for, run_call
from runs.executor.context import build_context, step_env, step_sandbox
from runs.executor.handover import fail_node
from runs.executor.spec import node_spec, spec_for
from runs.executor.state import lock_run, on_fresh_connection
from runs.executor.stream import FLUSH_SECONDS, OutputStream
from runs.models import Gate, Iteration, NodeRun, Run
from runs.providers import registry
from runs.providers.base import Cancelled, ProviderError
from runs.sandbox import run_process

from . import group as group_exec
from . import loop as loop_exec
from . import subrun
from .script import run_script
from .spec import gate_decisions


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
            decisions = gate_decisions(node.approval.decisions)
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
                approvals=node.approval.approvals,
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
            output, structured, extra, call = _execute(run, spec, node, row, stream)
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
            if call is not None:  # the call's end first: the run's lock keeps `owned` so
                if not (owned and call.iteration.complete(locked, call.outcome)):
                    return
                printed.update(call.outcome.fields)  # the answer's file, as its iteration's
            if row.complete(locked, output, structured, attempt=stream.attempt, columns=printed):
                if "." in row.node_id and extra.get("session_id"):
                    group_exec.remember_session(row, extra["session_id"])
        return


def _execute(run: Run, spec, node, row: NodeRun, stream: OutputStream):
    if node.kind == NodeRun.Kind.SCRIPT:
        return (*run_script(run, spec, node, row, stream), None)  # no agent call
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
    return _ask(run, spec, node, row, ctx)


@dataclass(frozen=True)
class AnsweredCall:
    """A step's agent call that returned: its iteration ends with the step."""

    iteration: Iteration
    outcome: object  # runs.executor.agent.AgentOutcome


def _ask(run: Run, spec, node, row: NodeRun, ctx):
    """A prompt or command step's agent call, as the row's next iteration: its output
    streams into the iteration, whose lease is the row's (the claimed node holds it)."""
    provider = registry.resolve(node.provider or _group_default(spec, row, "provider"), spec, run)
    prompt = prepare_prompt(substitute(node.prompt, ctx), provider, node.output_format)
    session_id = _group_session(spec, row)
    named = getattr(provider, "name", "") or "default"
    it = on_fresh_connection(_begin_call, row, prompt, session_id, named)
    holder = (NodeRun, row.pk, row.attempts)
    stream = OutputStream(Iteration, it.pk, it.attempts, run.pk, holder=holder)
    request = request_for(
        run,
        node,
        prompt,
        spec=spec,
        model=node.model or _group_default(spec, row, "model"),
        node_id=row.node_id,
        iteration=row.iteration,  # a loop_group's body step: the group's iteration
        schema=node.output_format,
        session_id=session_id,
        ctx=ctx,
    )
    try:
        outcome = run_call(provider, request, stream)
    except (StepFailed, ProviderError) as exc:
        on_fresh_connection(_call_failed, it, str(exc), stream)
        raise
    extra = {
        "prompt": prompt,
        "raw": outcome.raw,
        "session_id": outcome.result.session_id,
    }
    return outcome.text, outcome.payload, extra, AnsweredCall(it, outcome)


def _begin_call(row: NodeRun, prompt: str, session_id: str | None, provider: str) -> Iteration:
    """The row's one iteration, started here for this attempt: made by the first attempt,
    numbered after the loop_group round it runs in (1 outside a group), and claimed again
    by each retry, or by the attempt after a lost worker (whose call ends failed first).
    The row names its `provider` (the metrics add usage up per provider)."""
    with transaction.atomic():
        run = lock_run(row.run_id, with_recipe=False)
        if run.is_terminal:
            raise Cancelled(f"the run is {run.status}")
        row.refresh_from_db(fields=["state"])
        NodeRun.objects.filter(pk=row.pk).update(state={**row.state, "provider": provider})
        it = row.iterations.filter(generation=row.generation).first()
        if it is None:
            it = row.start_iteration(run, max(row.iteration, 1), here=True)
        else:
            if it.status == Iteration.Status.RUNNING:
                it.fail(run, "its worker was lost; the step asks again")
            it.reopen()
        if it is None or not it.start(run, prompt, session_id, leased=False):
            raise Cancelled("the step was cancelled")
        return it


def _call_failed(it: Iteration, error: str, stream: OutputStream) -> None:
    """The call failed: its iteration keeps what the agent printed (the node fails, or
    tries again, after)."""
    printed = stream.text
    with transaction.atomic():
        run = lock_run(it.run_id, with_recipe=False)
        it.fail(run, error, raw_output=printed, output=printed, **stream.fields())


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
