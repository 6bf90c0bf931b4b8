"""One agent call with structured output: validate, and re-ask best-effort providers."""

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
from runs.providers.base import AgentRequest, AgentResult, Provider, ProviderError

# Nothing here imports the console's models or reads its settings at import: a Python loop
# run as a plain script, without the console (recipes.python.hosts.DirectHost), calls
# `call_agent` too. The lease keeping below is imported only when there is a lease.

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
    delay = 1.0
    for attempt in range(TRANSIENT_RETRIES + 1):
        try:
            return provider.run(request, on_chunk)
        except ProviderError as exc:
            if exc.permanent or attempt == TRANSIENT_RETRIES:
                raise StepFailed(str(exc)) from exc
            on_chunk(f"\n[transient error, retrying in {delay:.0f}s: {exc}]\n")
            if getattr(on_chunk, "renew_lease", None) is None:
                time.sleep(delay)  # a plain callback: no lease to keep
            else:
                from .lease import keep_lease, renewer

                with keep_lease(renewer(on_chunk)):
                    time.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")


def _add_usage(total: AgentResult, extra: AgentResult) -> None:
    for name in ("tokens_in", "tokens_out", "cost_usd"):
        more = getattr(extra, name)
        if more is not None:
            setattr(total, name, (getattr(total, name) or 0) + more)
    total.tool_calls = [*total.tool_calls, *extra.tool_calls]
    total.worktree_diff = worktree.merge_diffs(total.worktree_diff, extra.worktree_diff)
