"""Conversation history of the HTTP providers, kept in the database by session id."""

from __future__ import annotations

import uuid

from runs.models import Conversation


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
