"""A workflow's `loop` nodes: each iteration a full agent session, claimed, recorded and
cancellable on its own, one `run_iteration` task each (runs/dispatch.py may chain quick
ones; runs.executor.handover reads the iteration and hands it here)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import InterfaceError, OperationalError, transaction

from console.redact import plain_cause
from runs.engine.completion import detect_signal, gate_text, until_field_met
from runs.engine.deadlines import GateDeadline
from runs.engine.stop_rules import COMPLETE as STOP_COMPLETES
from runs.engine.stop_rules import Firing
from runs.engine.variables import VarContext, VariableError, substitute, substitute_shell
from runs.executor.agent import StepFailed, prepare_prompt, request_for, run_call
from runs.executor.context import build_context, step_env, step_sandbox
from runs.executor.provider_queue import give_back, put_back, take_or_queue
from runs.executor.spec import node_spec, spec_for
from runs.executor.state import lock_run, max_iterations_error, on_fresh_connection
from runs.executor.stream import OutputStream
from runs.models import Gate, Iteration, NodeRun, Run, batched
from runs.providers import registry
from runs.providers.base import Cancelled, ProviderBusy, ProviderError
from runs.sandbox import run_process

from .scoring import stop_firing, take_score
from .spec import gate_decisions

log = logging.getLogger(__name__)


def declared_channels(loop) -> list[str]:
    return [name for name in ("until", "until_field", "until_bash") if getattr(loop, name, None)]


def start_loop(run: Run, spec, node, row: NodeRun) -> None:
    # Snapshot the prompt template: a paused run keeps the prompt it started with.
    # ... and which provider the recipe names (the metrics add usage up per provider).
    state = {
        "prompt_template": node.loop.prompt,
        "provider": node.provider or spec.provider or "default",
    }
    if node.loop.score:  # what the pages, the chart and the inbox read of a scored loop
        state.update(score=next(iter(node.loop.score)), stop=node.loop.stop or {})
    open_loop(run, row, node.loop.max_iterations, state)


def open_loop(run: Run, row: NodeRun, max_iterations: int, state: dict) -> None:
    """A claimed `loop` or `loop_group` node starts looping: it keeps its bound and `state`
    (merged into its own), holds no lease of its own, and starts iteration 1."""
    with transaction.atomic():
        run = lock_run(run.pk)
        row.refresh_from_db()
        if run.is_terminal or row.status != NodeRun.Status.RUNNING:
            return
        row.max_iterations = max_iterations
        row.lease_expires_at = None
        row.state = {**row.state, **state}
        # Not its status: the node's transitions own that (start_iteration below).
        row.save(update_fields=["max_iterations", "lease_expires_at", "state"])
        run.append_event("loop_started", row.node_id, max_iterations=max_iterations)
        row.start_iteration(run, 1)


def run_loop_iteration(it: Iteration) -> None:
    """One iteration of a workflow's `loop` node (loops/workflow/kind.py registers it).
    Under a provider's limits it first takes a slot, or goes back to the queue to wait
    (runs/executor/provider_queue.py), holding no worker and spending no attempt."""
    run = it.run
    if run.is_terminal:
        return
    spec = spec_for(run)
    node = node_spec(spec, it.node_run.node_id)
    turn, prompt_error, slot = None, None, None
    try:
        turn = _prepare(it, spec, node)
    except (OperationalError, InterfaceError):
        raise
    except Exception as exc:  # noqa: BLE001 - claimed, then reported below like any failure
        prompt_error = exc
    if turn is not None:
        try:
            go, slot = take_or_queue(it, turn.provider)
        except StepFailed as exc:  # it waited past the ceiling
            go, prompt_error, turn = True, exc, None
        if not go:
            return
    if not _claim(it, turn):
        give_back(slot)
        return
    _run_claimed(it, spec, node, turn, prompt_error, slot)


def _run_claimed(it: Iteration, spec, node, turn, prompt_error, slot) -> None:
    stream = OutputStream(Iteration, it.pk, it.attempts, it.run_id)
    outcome = None
    try:
        if prompt_error is not None:
            raise prompt_error
        try:
            outcome, fired, scored = _ask(it, spec, node, turn, stream, slot)
        finally:
            give_back(slot, outcome)  # if the call raised (`_ask` gives it back once answered)
    except Cancelled:
        stream.keep_after_cancel()
        return
    except (OperationalError, InterfaceError):
        raise  # the database is unreachable, not the agent at fault: the sweep re-runs it
    except ProviderBusy as busy:  # back to the queue, the attempt not spent
        try:
            on_fresh_connection(put_back, it, busy, stream)
        except StepFailed as exc:
            on_fresh_connection(_iteration_failed, it, str(exc), stream)
        return
    except (StepFailed, VariableError, ProviderError) as exc:
        on_fresh_connection(_iteration_failed, it, str(exc), stream)
        return
    except Exception as exc:  # an iteration that raises fails the node at once
        log.exception("iteration %s crashed", it.pk)
        error = f"{plain_cause(exc)} (details in the worker's log)"
        on_fresh_connection(_iteration_failed, it, error, stream)
        return
    on_fresh_connection(_iteration_done, it, node, outcome, fired, scored)


@dataclass(frozen=True)
class _Turn:
    """What an iteration asks its agent, built from reads only."""

    ctx: VarContext
    provider: object
    prompt: str
    session_id: str | None


def _prepare(it: Iteration, spec, node) -> _Turn:
    run, row, loop = it.run, it.node_run, node.loop
    prev = "" if it.number <= 1 or it.after_gate else (it.previous_output or "")
    ctx = build_context(run, spec, row, loop_user_input=it.feedback, loop_prev_output=prev)
    provider = registry.resolve(node.provider or spec.provider, spec, run)
    template = row.state.get("prompt_template") or loop.prompt
    prompt = prepare_prompt(substitute(template, ctx), provider, node.output_format)
    threaded = not loop.fresh_context and it.number > 1
    session_id = row.state.get("session_id") if threaded else None
    return _Turn(ctx, provider, prompt, session_id)


def _claim(it: Iteration, turn: _Turn | None) -> bool:
    """Claim, record the prompt and log the start in one statement (round trips are most
    of the engine's cost per iteration). The prompt was built from reads only, so a
    duplicate delivery that loses the claim has changed nothing. With no `turn` (its
    prompt could not be built) the iteration is claimed with none, to fail it."""
    if turn is not None:
        return Iteration.objects.claim_logged(it, turn.prompt, turn.session_id)
    with transaction.atomic():
        locked = lock_run(it.run_id, with_recipe=False)
        return not locked.is_terminal and it.start(locked, "", None)


def _ask(it: Iteration, spec, node, turn: _Turn, stream: OutputStream, slot) -> tuple:
    """The agent's answer to the iteration's prompt, streamed as it comes, the completion
    conditions it met (`until_bash` runs only if no other did) and its score's columns.
    The provider's slot is given back as soon as the agent answered: the checks and a
    judge (which may use the same provider) do not hold it."""
    run, loop = it.run, node.loop
    request = request_for(
        run,
        node,
        turn.prompt,
        spec=spec,
        node_id=it.node_run.node_id,
        iteration=it.number,
        schema=node.output_format,
        session_id=turn.session_id,
        ctx=turn.ctx,
    )
    request.queue_when_busy = True  # it holds its slot (run_loop_iteration)
    fired: list[str] = []
    # Signals are looked for in the whole answer, before it is cut to what the row keeps
    # (LOOP_MAX_OUTPUT_BYTES; the rest is in the file).
    outcome = run_call(
        turn.provider, request, stream, inspect=lambda answer: fired.extend(_signals(loop, answer))
    )
    give_back(slot, outcome)
    if (
        loop.until_bash
        and not fired
        and until_bash_met(loop.until_bash, turn.ctx, run, stream, step_sandbox(run, spec, node))
    ):
        fired.append("until_bash")
    return outcome, fired, take_score(it, spec, node, turn.ctx, outcome, stream)


def _signals(loop, outcome) -> list[str]:
    """The completion signals in the agent's answer (`until`, `until_field`)."""
    fired = []
    if loop.until and detect_signal(outcome.raw, loop.until):
        fired.append("until")
    if loop.until_field and until_field_met(outcome.payload, loop.until_field):
        fired.append("until_field")
    return fired


def until_bash_met(script: str, ctx, run, stream: OutputStream, sandbox) -> bool:
    """Whether an `until_bash` check (a loop's, a loop_group's) exits 0, run in `sandbox`;
    its output is not kept, but each chunk proves the work is still this worker's."""
    command, values = substitute_shell(script, ctx)
    result = run_process(
        ["bash", "-c", command],
        sandbox=sandbox,
        env={**step_env(run, ctx), **values},
        on_chunk=lambda chunk: stream(""),
    )
    return result.exit_code == 0


def _iteration_failed(it: Iteration, error: str, stream: OutputStream) -> None:
    raw = stream.text
    with transaction.atomic():
        run = lock_run(it.run_id)
        # What the agent printed is kept and shown (once: the error is one line); the node
        # fails, so nothing downstream takes it for an answer.
        if run.is_terminal or not it.fail(
            run, error, raw_output=raw, output=raw, **stream.fields()
        ):
            return
        row = NodeRun.objects.get(pk=it.node_run_id)
        row.fail(run, f"iteration {it.number} failed: {error}")


def _iteration_done(it: Iteration, node, outcome, fired: list[str], scored: dict) -> None:
    result = outcome.result
    loop = node.loop
    goes_on = next_move(loop, it.number, fired) == GO_ON
    # The one-statement path skips what only the full transaction does: keeping a call's
    # conversation, tool events and worktree diff (record_call) and the budget check of
    # start_iteration.
    plain = (
        result.conversation is None
        and not result.tool_calls
        and not result.worktree_diff
        and not it.run.budget
        and not scored
    )
    if goes_on and plain and batched.in_use():
        # The plain "go on": complete, log, and queue the next iteration in one statement.
        it.complete_then_next(outcome, channels=fired)
        return
    with transaction.atomic():
        run = lock_run(it.run_id, with_recipe=False)
        if run.is_terminal or not it.complete(run, outcome, channels=fired, **scored):
            return
        row = NodeRun.objects.select_for_update().get(pk=it.node_run_id)
        # Not saved here: the transition settle_loop makes writes them (one write, not two).
        columns = {
            "output": outcome.text,
            "structured": outcome.payload,
            "output_file": outcome.fields.get("output_file", ""),
            "output_bytes": outcome.fields.get("output_bytes"),
            "state": {**row.state, "session_id": result.session_id or row.state.get("session_id")},
        }
        if scored and scored["score"] is None:
            reason = scored["score_detail"].get("error", "")
            run.append_event("score_missing", row.node_id, iteration=it.number, reason=reason)
        firing = stop_firing(row, loop, it)
        if firing is not None:
            run.append_event("stop_rule_fired", row.node_id, **firing.as_dict())
        settle_loop(run, row, loop, it, fired, columns, firing=firing)


COMPLETE, FAIL, GATE, GO_ON = "complete", "fail", "gate", "go on"


def next_move(loop, number: int, fired: list[str], firing: Firing | None = None) -> str:
    """What a loop (or a loop_group) does after iteration `number`: the one rule, acted on
    by `settle_loop` and asked first by the one-statement path, which takes only GO_ON. A
    completion signal is the loop's own word; a stop rule that fired (`firing`) does what
    the recipe says it does, even on the last iteration."""
    if fired and (not loop.interactive or loop.signal_completes):
        return COMPLETE
    if firing is not None:
        return COMPLETE if firing.then == STOP_COMPLETES else GATE
    if not fired and number >= loop.max_iterations:
        return FAIL
    return GATE if loop.interactive else GO_ON


def settle_loop(
    run: Run,
    row: NodeRun,
    loop,
    it: Iteration,
    fired: list[str],
    columns: dict,
    *,
    firing: Firing | None = None,
) -> None:
    """After an iteration (of a loop or a loop_group): complete, gate, fail or go on
    (`next_move`). `columns` (the node's output, its file, its state) are written by
    whichever transition it makes. A stop rule that fired is the gate's message, and the
    channel its decision completes by (`stop:<rule>`)."""
    move = next_move(loop, it.number, fired, firing)
    if firing is not None and not (fired and move == COMPLETE):
        fired = [f"stop:{firing.rule}"]
    if move == COMPLETE:
        done = {k: v for k, v in columns.items() if k not in ("output", "structured")}
        row.complete(
            run, it.output, it.structured, iterations=it.number, channels=fired, columns=done
        )
    elif move == FAIL:
        row.fail(run, max_iterations_error(row.node_id, loop), columns=columns)
    elif move == GATE:
        message = gate_text(
            fired=fired,
            declared=declared_channels(loop),
            output=it.output,
            gate_message=loop.gate_message or "",
            signal=getattr(loop, "until", None) or "",
            field=getattr(loop, "until_field", None) or "",
        )
        if firing is not None:  # the rule is the gate's first line, the output follows
            message = firing.words + message[len(message.split("\n", 1)[0]) :]
        row.pause(
            run,
            kind=Gate.Kind.LOOP,
            message=message,
            iteration=it,
            fired=fired,
            decisions=gate_decisions(loop.decisions),
            approvals=loop.approvals,
            deadline=GateDeadline.of(loop),
            columns=columns,
        )
    else:
        row.start_iteration(run, it.number + 1, columns=columns)
