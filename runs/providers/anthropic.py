"""The Anthropic Messages API, streamed (message_start / content_block_start /
content_block_delta / content_block_stop / message_delta / message_stop).

Like the OpenAI provider, a threaded session's history is kept in the database.
Structured output is best effort: the schema goes into the prompt and an invalid answer
is re-asked by the engine.

Tools (`AgentRequest.tools`) are sent as `tools` (name, description, input_schema). An
answer that calls them streams `tool_use` content blocks (the id and name at the block's
start, the input as `input_json_delta` pieces) and stops with `stop_reason: tool_use`;
each call runs and its result goes back in the next user message as a `tool_result`
block, until the model answers without calling a tool (at most `max_tool_rounds`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from . import history
from .activity import summarize_arguments, tool_event
from .base import AgentRequest, AgentResult, OnChunk, ProviderError
from .http import HttpStream, api_key, json_event, stream_error_message
from .tool_rounds import call_tool, max_tool_rounds, too_many_rounds

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 8192
# Errors the API reports inside a stream that a later attempt may not meet.
TRANSIENT_TYPES = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}


@dataclass
class _Answer:
    blocks: list[dict] = field(default_factory=list)  # the assistant's content, in order
    tokens_in: int | None = None
    tokens_out: int | None = None
    stop_reason: str = ""
    timed_out: bool = False

    @property
    def text(self) -> str:
        return "".join(b.get("text", "") for b in self.blocks if b.get("type") == "text")

    @property
    def calls(self) -> list[dict]:
        return [b for b in self.blocks if b.get("type") == "tool_use"]


class _Blocks:
    """The answer's content blocks as they stream in: a text block grows with each
    delta (passed on as it comes), a tool call's input comes in JSON pieces, parsed
    (`tool_input`) when its block stops."""

    def __init__(self, answer: _Answer, tool_input: Callable[[list[str]], dict]):
        self.answer, self.tool_input = answer, tool_input
        self.open: dict[int, dict] = {}  # by the block's index
        self.partial_json: dict[int, list[str]] = {}  # a tool_use block's input so far

    def start(self, data: dict) -> None:
        block = dict(data.get("content_block") or {})
        index = int(data.get("index") or 0)
        self.open[index] = block
        self.answer.blocks.append(block)
        if block.get("type") == "tool_use":
            self.partial_json[index] = []

    def delta(self, data: dict, on_chunk: OnChunk) -> None:
        index = int(data.get("index") or 0)
        delta = data.get("delta") or {}
        block = self.open.get(index)
        if delta.get("type") == "text_delta" and delta.get("text"):
            if block is None:  # a server that sends no block start
                block = self.open[index] = {"type": "text", "text": ""}
                self.answer.blocks.append(block)
            block["text"] = block.get("text", "") + delta["text"]
            on_chunk(delta["text"])
        elif delta.get("type") == "input_json_delta" and index in self.partial_json:
            self.partial_json[index].append(delta.get("partial_json") or "")

    def stop(self, data: dict) -> None:
        index = int(data.get("index") or 0)
        if index in self.partial_json:
            self.open[index]["input"] = self.tool_input(self.partial_json.pop(index))


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
        key = api_key(self.name, self.api_key_env, required=True, kind="anthropic")
        session_id, earlier = history.load(request.session_id)
        messages = [*earlier, {"role": "user", "content": request.prompt}]
        tokens_in = tokens_out = None
        events: list[dict] = []
        rounds = max_tool_rounds(self.options)
        for round_number in range(rounds + 1):
            answer = self._ask(self._body(model, messages, request), key, request, on_chunk)
            if answer.tokens_in is not None:
                tokens_in = (tokens_in or 0) + answer.tokens_in
            if answer.tokens_out is not None:
                tokens_out = (tokens_out or 0) + answer.tokens_out
            if answer.timed_out or not answer.calls:
                break
            if round_number == rounds:
                raise too_many_rounds(self.name, rounds)
            # The API refuses empty text blocks (a block started, then no text came).
            kept = [b for b in answer.blocks if b.get("type") != "text" or b.get("text")]
            messages.append({"role": "assistant", "content": kept})
            results = []
            for call in answer.calls:
                result = call_tool(request.tools, call["name"], call.get("input") or {})
                events.append(
                    tool_event(
                        on_chunk, call["name"], summarize_arguments(call.get("input")), ok=result.ok
                    )
                )
                results.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": call["id"],
                        "content": result.content,
                        **({} if result.ok else {"is_error": True}),
                    }
                )
            messages.append({"role": "user", "content": results})
        return history.finish_turn(
            self,
            session_id,
            messages,
            answer.text,
            tokens_in,
            tokens_out,
            timed_out=answer.timed_out,
            model=model,
            tool_calls=events,
        )

    def _body(self, model: str, messages: list[dict], request: AgentRequest) -> dict:
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
        if request.tools:
            body["tools"] = [
                {
                    "name": s["name"],
                    "description": s["description"],
                    "input_schema": s["parameters"],
                }
                for s in request.tools.specs()
            ]
        return body

    def _ask(self, body: dict, key: str, request: AgentRequest, on_chunk: OnChunk) -> _Answer:
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
        answer = _Answer()
        blocks = _Blocks(answer, self._tool_input)
        for event in stream.events():
            data = self._parse(event.data)
            kind = data.get("type") or event.event
            if kind == "message_start":
                usage = (data.get("message") or {}).get("usage") or {}
                answer.tokens_in = _input_tokens(usage)
                answer.tokens_out = usage.get("output_tokens")
            elif kind == "content_block_start":
                blocks.start(data)
            elif kind == "content_block_delta":
                blocks.delta(data, on_chunk)
            elif kind == "content_block_stop":
                blocks.stop(data)
            elif kind == "message_delta":
                usage = data.get("usage") or {}
                answer.tokens_out = usage.get("output_tokens", answer.tokens_out)
                answer.tokens_in = _input_tokens(usage) or answer.tokens_in
                answer.stop_reason = (data.get("delta") or {}).get("stop_reason") or ""
            elif kind == "error":
                err = data.get("error") or {}
                raise ProviderError(
                    stream_error_message(self.name, err),
                    permanent=err.get("type") not in TRANSIENT_TYPES,
                )
            elif kind == "message_stop":
                break
        answer.timed_out = stream.timed_out
        return answer

    def _tool_input(self, pieces: list[str]) -> dict:
        text = "".join(pieces).strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except ValueError:
            raise ProviderError(
                f"provider '{self.name}': a tool call's input is not JSON: {text[:200]}",
                permanent=False,
            ) from None
        return value if isinstance(value, dict) else {}

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
