"""The Anthropic Messages API, streamed (message_start / content_block_delta /
message_delta / message_stop).

Like the OpenAI provider, a threaded session's history is kept in the database.
Structured output is best effort: the schema goes into the prompt and an invalid answer
is re-asked by the engine.
"""

from __future__ import annotations

from . import history
from .base import AgentRequest, AgentResult, OnChunk, ProviderError
from .http import HttpStream, api_key, json_event, stream_error_message

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 8192
# Errors the API reports inside a stream that a later attempt may not meet.
TRANSIENT_TYPES = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}


class AnthropicProvider:
    structured_output = "best_effort"

    def __init__(self, name: str, config: dict):
        self.name = name
        self.base_url = (config.get("base_url") or "https://api.anthropic.com").rstrip("/")
        self.model = config.get("model")
        self.api_key_env = config.get("api_key_env") or "ANTHROPIC_API_KEY"
        self.options = config

    @property
    def url(self) -> str:
        root = self.base_url if self.base_url.endswith("/v1") else self.base_url + "/v1"
        return root + "/messages"

    def run(self, request: AgentRequest, on_chunk: OnChunk) -> AgentResult:
        model = request.model or self.model
        if not model:
            raise ProviderError(
                f"provider '{self.name}': no model: set `model:` on the provider, recipe or node"
            )
        key = api_key(self.name, self.api_key_env, required=True)
        session_id, earlier = history.load(request.session_id)
        messages = [*earlier, {"role": "user", "content": request.prompt}]
        body = {
            "model": model,
            "max_tokens": int(self.options.get("max_tokens") or DEFAULT_MAX_TOKENS),
            "messages": messages,
            "stream": True,
        }
        if self.options.get("system"):
            body["system"] = self.options["system"]
        if "temperature" in self.options:
            body["temperature"] = self.options["temperature"]
        headers = {
            "content-type": "application/json",
            "x-api-key": key,
            "anthropic-version": str(self.options.get("anthropic_version") or API_VERSION),
        }
        stream = HttpStream(
            self.name,
            self.url,
            headers=headers,
            body=body,
            on_chunk=on_chunk,
            idle_timeout=request.idle_timeout,
        )
        parts: list[str] = []
        tokens_in = tokens_out = None
        for event in stream.events():
            data = self._parse(event.data)
            kind = data.get("type") or event.event
            if kind == "message_start":
                usage = (data.get("message") or {}).get("usage") or {}
                tokens_in = _input_tokens(usage)
                tokens_out = usage.get("output_tokens")
            elif kind == "content_block_delta":
                delta = data.get("delta") or {}
                if delta.get("type") == "text_delta" and delta.get("text"):
                    parts.append(delta["text"])
                    on_chunk(delta["text"])
            elif kind == "message_delta":
                usage = data.get("usage") or {}
                tokens_out = usage.get("output_tokens", tokens_out)
                tokens_in = _input_tokens(usage) or tokens_in
            elif kind == "error":
                err = data.get("error") or {}
                raise ProviderError(
                    stream_error_message(self.name, err),
                    permanent=err.get("type") not in TRANSIENT_TYPES,
                )
            elif kind == "message_stop":
                break
        return history.finish_turn(
            self,
            session_id,
            messages,
            "".join(parts),
            tokens_in,
            tokens_out,
            timed_out=stream.timed_out,
        )

    def _parse(self, data: str) -> dict:
        return json_event(self.name, data)


def _input_tokens(usage: dict) -> int | None:
    if "input_tokens" not in usage:
        return None
    return (
        (usage.get("input_tokens") or 0)
        + (usage.get("cache_read_input_tokens") or 0)
        + (usage.get("cache_creation_input_tokens") or 0)
    )
