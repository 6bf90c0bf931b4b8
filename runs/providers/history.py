"""Conversation history of the HTTP providers, kept in the database by session id.

A provider reads the history it continues (`load`) and returns the whole conversation in
its result; the executor stores it (`save`) when it records the call, so a call whose
result is thrown away (cancelled, taken over) leaves no turn behind."""

from __future__ import annotations

import uuid

from runs.models import Conversation

from . import pricing
from .base import AgentResult


def load(session_id: str | None) -> tuple[str, list[dict]]:
    """(session id, earlier messages). No session id: a fresh conversation."""
    if not session_id:
        return uuid.uuid4().hex, []
    found = Conversation.objects.filter(session_id=session_id).first()
    return session_id, list(found.messages) if found else []


def save(session_id: str, provider: str, messages: list[dict]) -> None:
    Conversation.objects.update_or_create(
        session_id=session_id, defaults={"provider": provider, "messages": messages}
    )


def finish_turn(
    provider,
    session_id: str,
    messages: list[dict],
    text: str,
    tokens_in,
    tokens_out,
    *,
    timed_out: bool,
    model: str | None = None,
    tool_calls: list[dict] | None = None,
) -> AgentResult:
    """Report a finished turn with the conversation to keep, priced by the provider's
    options or else the price table's entry for ``model`` (runs.providers.pricing). Kept
    only when recorded, so a retried request never duplicates a message."""
    return AgentResult(
        text=text,
        session_id=session_id,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        cost_usd=pricing.cost(provider.options, tokens_in, tokens_out, model),
        timed_out=timed_out,
        conversation=messages + [{"role": "assistant", "content": text}],
        tool_calls=list(tool_calls or []),
    )
