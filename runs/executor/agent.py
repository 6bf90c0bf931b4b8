"""One agent call, the same for every kind of loop: its request (`request_for`), how it
runs (`run_call`), and its structured output, validated, with best-effort providers re-asked
(`call_agent`)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace

from runs import worktree
from runs.engine.completion import strip_signal_tags
from runs.engine.structured import (
    extract_json,
    reask_prompt,
    schema_prompt_suffix,
    validate_payload,
)
from runs.outputs import max_bytes, size_words, utf8_size
from runs.providers.base import (
    DEFAULT_IDLE_TIMEOUT_MS,
    AgentRequest,
    AgentResult,
    Cancelled,
    Provider,
    ProviderBusy,
    ProviderError,
)

# Nothing here imports the console's models or reads its settings at import: a Python loop
# run as a plain script, without the console (loops.python.hosts.DirectHost), calls
# `request_for` and `run_call` too. What needs the console (a run's environment, the lease
# keeping) is imported only when there is a run or a lease.

MAX_REASKS = 3
TRANSIENT_RETRIES = 3


class StepFailed(Exception):
    """The step cannot succeed; the message is shown on the node."""


@dataclass
class AgentOutcome:
    result: AgentResult
    raw: str  # everything the agent said, for signal detection
    text: str  # what users and downstream nodes see
    payload: object | None = None
    reasks: int = 0
    provider: str = ""  # the provider's name, for the conversation it returned
    # The row's output_file / output_bytes once OutputStream.keep recorded it (runs/outputs.py)
    fields: dict = field(default_factory=dict)


def request_for(
    run,
    node,
    prompt: str,
    *,
    node_id: str,
    iteration: int,
    spec=None,
    model: str | None = None,
    schema: dict | None = None,
    session_id: str | None = None,
    workdir: str | None = None,
    ctx=None,
    env: dict[str, str] | None = None,
    tools=None,
    read_only: bool = False,
    auto_approve: bool = False,
) -> AgentRequest:
    """The request of one agent call of `run` (None: a Python loop run as a plain script):
    `prompt` (made by `prepare_prompt`) for the agent `node` declares (a workflow's node, a
    driven recipe's agent, a step machine's role, a Python `Agent`) in the recipe `spec`.

    What every kind's agent gets, decided here and nowhere else:
    - its environment: the run's variables (`step_env`: from `ctx`, the variables its prompt
      was made from, else the run's own), with the kind's own `env` on top;
    - its idle timeout: the node's `idle_timeout` (milliseconds), else
      DEFAULT_IDLE_TIMEOUT_MS;
    - the network, unless the node says `network: none` (`agent_network`);
    - the recipe's `limits`, each replaced by the node's (`limits_of`);
    - its model: `model` (the kind's own choice, a loop_group's), else the node's, else the
      recipe's; its working folder: `workdir`, else the run's.
    A node or recipe that declares none of these gets the defaults."""
    from runs.sandbox import agent_network, limits_of

    if run is not None:
        from .context import run_context, run_dirs, step_env

        env = {**step_env(run, ctx or run_context(run)), **(env or {})}
        workdir = workdir or str(run_dirs(run)[0])
    return AgentRequest(
        prompt=prompt,
        workdir=workdir,
        session_id=session_id,
        model=model or getattr(node, "model", None) or getattr(spec, "model", None),
        output_schema=schema,
        idle_timeout=(getattr(node, "idle_timeout", None) or DEFAULT_IDLE_TIMEOUT_MS) / 1000,
        env=dict(env or {}),
        run_id=getattr(run, "pk", None),
        node_id=node_id,
        iteration=iteration,
        tools=tools,
        read_only=read_only,
        auto_approve=auto_approve,
        network=agent_network(getattr(node, "network", None)),
        limits=limits_of(getattr(spec, "limits", None), getattr(node, "limits", None)),
    )


def run_call(
    provider: Provider, request: AgentRequest, output, *, on_chunk=None, inspect=None
) -> AgentOutcome:
    """Run `request` on `provider`, the way every kind does, and return its AgentOutcome.

    The agent's output streams into `output`: an OutputStream, whose flushes prove the work
    is still this worker's (they raise Cancelled once it was cancelled or taken over), or
    any callback (a Python loop run as a plain script keeps nothing). `on_chunk`: what the
    provider is handed instead, when the kind does more with each chunk (it passes them on
    to `output`). The answer is re-asked until it fits `request.output_schema`, then
    published and kept as its row keeps it (LOOP_MAX_OUTPUT_BYTES), the lease renewed
    meanwhile; `inspect(outcome)` sees the whole answer first (a loop's completion signals).

    Cancelled: what the agent printed is kept on the cancelled row, and Cancelled raised
    again. Its usage (tokens, cost), session and tool calls travel in the outcome: the kind
    records them with the call's end (`Iteration.complete`), in the same transaction."""
    feed = on_chunk or output
    keeps = hasattr(output, "keep")
    slot = None if request.queue_when_busy else _slot_for(provider, feed)
    outcome = None
    try:
        outcome = call_agent(provider, request, feed, request.output_schema)
    except Cancelled:
        if keeps:
            output.keep_after_cancel()
        raise
    finally:
        if slot is not None:
            from .provider_queue import give_back

            give_back(slot, outcome)
    if not keeps:
        if inspect is not None:
            inspect(outcome)
        return outcome
    from .lease import keep_lease, renewer

    output.publish()
    with keep_lease(renewer(feed)):  # the agent has returned: nothing else renews it
        if inspect is not None:
            inspect(outcome)
        output.keep(outcome)
    return outcome


def _slot_for(provider, feed):
    """A slot under the provider's limits, waited for here (a kind whose calls do not go
    back to the queue); None for a provider without limits."""
    inner = getattr(provider, "inner", provider)
    if not getattr(inner, "limits", None):
        return None
    import uuid

    from runs.providers import limits

    return limits.wait_for(provider, f"call:{uuid.uuid4().hex}", keep_alive=lambda: feed(""))


def prepare_prompt(prompt: str, provider: Provider, schema: dict | None) -> str:
    if schema and provider.structured_output != "enforced":
        return prompt + "\n\n" + schema_prompt_suffix(schema)
    return prompt


def call_agent(
    provider: Provider, request: AgentRequest, on_chunk, schema: dict | None
) -> AgentOutcome:
    result = _with_transient_retries(provider, request, on_chunk)
    outcome = AgentOutcome(
        result=result,
        raw=result.text,
        text=strip_signal_tags(result.text),
        provider=getattr(provider, "name", ""),
    )
    if not schema or result.timed_out:
        return outcome
    payload = result.structured
    errors: list[str] = []
    if payload is None:
        payload, parse_error = extract_json(result.text)
        errors = [parse_error] if parse_error else []
    if not errors:
        errors = validate_payload(schema, payload)
    reasks = 0
    while errors and provider.structured_output != "enforced" and reasks < MAX_REASKS:
        reasks += 1
        # A re-ask runs in a throwaway session so the invalid turn never becomes context.
        on_chunk(f"\n\n[re-ask {reasks}/{MAX_REASKS}: the answer did not match the schema]\n")
        retry = replace(
            request, prompt=request.prompt + "\n\n" + reask_prompt(errors, schema), session_id=None
        )
        answer = _with_transient_retries(provider, retry, on_chunk)
        payload, parse_error = (
            (answer.structured, None)
            if answer.structured is not None
            else extract_json(answer.text)
        )
        errors = [parse_error] if parse_error else validate_payload(schema, payload)
        _add_usage(result, answer)
    if errors:
        raise StepFailed("structured output does not match output_format: " + "; ".join(errors))
    text = json.dumps(payload, ensure_ascii=False)
    if utf8_size(text) > max_bytes():
        # Kept whole or not at all: the end of a JSON document is not an answer.
        raise StepFailed(
            f"the structured output is {size_words(utf8_size(text))}, more than the "
            f"{size_words(max_bytes())} an output may keep (LOOP_MAX_OUTPUT_BYTES)"
        )
    outcome.payload = payload
    outcome.text = text
    outcome.reasks = reasks
    return outcome


def _with_transient_retries(provider: Provider, request: AgentRequest, on_chunk) -> AgentResult:
    """The call, tried again after a transient error (three times, a second, then two,
    four). A busy provider (429, 503, 529) is waited for instead, as long as it takes up to
    the ceiling, with no try spent: in the queue (ProviderBusy, `queue_when_busy`), else
    here (`_wait_while_busy`)."""
    delay, failures, busy = 1.0, 0, None
    while True:
        try:
            return provider.run(request, on_chunk)
        except ProviderError as exc:
            if exc.busy:
                busy = _wait_while_busy(provider, request, on_chunk, exc, busy)
                continue
            if exc.permanent or failures == TRANSIENT_RETRIES:
                raise StepFailed(str(exc)) from exc
            failures += 1
            on_chunk(f"\n[transient error, retrying in {delay:.0f}s: {exc}]\n")
            _pause(on_chunk, delay)
            delay *= 2


def _wait_while_busy(provider, request, on_chunk, exc: ProviderError, busy) -> tuple:
    """After a busy answer: count it, then put the call back in the queue, or wait here
    for the provider's Retry-After (else a backoff with jitter). `busy` is (first busy
    answer's time, answers so far); past the ceiling the call fails with the provider's
    words."""
    from runs.providers import limits

    name = getattr(provider, "name", "") or "provider"
    limits.count("throttled", name)
    if request.queue_when_busy:
        raise ProviderBusy(name, exc) from exc
    since, tries = busy or (time.monotonic(), 0)
    wait = limits.backoff(tries + 1, exc.retry_after)
    waited = time.monotonic() - since
    if waited + wait > limits.ceiling_seconds():
        raise StepFailed(limits.gave_up(name, waited, str(exc))) from exc
    on_chunk(f"\n[provider {name} is busy (HTTP {exc.status}); waiting {wait:.0f}s]\n")
    _pause(on_chunk, wait)
    limits.count("waited_seconds", name, wait)
    return since, tries + 1


def _pause(on_chunk, seconds: float) -> None:
    if getattr(on_chunk, "renew_lease", None) is None:
        time.sleep(seconds)  # a plain callback: no lease to keep
    else:
        from .lease import keep_lease, renewer

        with keep_lease(renewer(on_chunk)):
            time.sleep(seconds)


def _add_usage(total: AgentResult, extra: AgentResult) -> None:
    for name in ("tokens_in", "tokens_out", "cost_usd"):
        more = getattr(extra, name)
        if more is not None:
            setattr(total, name, (getattr(total, name) or 0) + more)
    total.tool_calls = [*total.tool_calls, *extra.tool_calls]
    total.worktree_diff = worktree.merge_diffs(total.worktree_diff, extra.worktree_diff)
