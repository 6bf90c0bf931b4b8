"""Any OpenAI-compatible chat-completions endpoint (OpenAI, Ollama, vLLM, LM Studio,
llama.cpp's server), streamed over server-sent events.

Chat APIs are stateless, so `fresh_context: false` is kept by the console: the history of
a session lives in the database (runs.models.Conversation) and is sent again each turn.
Structured output uses `response_format: json_schema` ("enforced"); a server that ignores
it can be declared `structured_output: best_effort` to get the schema in the prompt and
re-asks instead.

Tools (`AgentRequest.tools`) are offered as function tools. A streamed answer that calls
them carries `delta.tool_calls` fragments (an index, then the id and name, then pieces of
the JSON arguments); once it ends, each call runs and its result goes back as a
`role: tool` message, and the conversation goes on until the model answers without
calling a tool (at most `max_tool_rounds` rounds).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import history
from .activity import summarize_arguments, tool_event
from .base import AgentRequest, AgentResult, OnChunk, ProviderError
from .http import HttpStream, api_key, json_event, stream_error_message
from .tool_rounds import call_tool, max_tool_rounds, parsed_arguments, too_many_rounds


@dataclass
class _ToolCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class _Answer:
    text: str = ""
    calls: list[_ToolCall] = field(default_factory=list)
    usage: dict = field(default_factory=dict)
    timed_out: bool = False


class OpenAIProvider:
    def __init__(self, name: str, config: dict):
        self.name = name
        self.base_url = (config.get("base_url") or "https://api.openai.com/v1").rstrip("/")
        self.model = config.get("model")
        self.api_key_env = config.get("api_key_env")
        self.options = config
        self.structured_output = config.get("structured_output") or "enforced"
        if self.structured_output not in ("enforced", "best_effort"):
            raise ProviderError(
                f"provider '{name}': structured_output must be enforced or best_effort"
            )

    @property
    def url(self) -> str:
        return self.base_url + "/chat/completions"

    def run(self, request: AgentRequest, on_chunk: OnChunk) -> AgentResult:
        model = request.model or self.model
        if not model:
            raise ProviderError(
                f"provider '{self.name}': no model: set `model:` on the provider, recipe or node"
            )
        key = api_key(self.name, self.api_key_env, required=bool(self.api_key_env), kind="openai")
        session_id, earlier = history.load(request.session_id)
        messages = list(earlier)
        if not messages and self.options.get("system"):
            messages.append({"role": "system", "content": self.options["system"]})
        messages.append({"role": "user", "content": request.prompt})
        tokens_in = tokens_out = None
        events: list[dict] = []
        rounds = max_tool_rounds(self.options)
        for round_number in range(rounds + 1):
            answer = self._ask(self._body(model, messages, request), key, request, on_chunk)
            if answer.usage:
                tokens_in = (tokens_in or 0) + (answer.usage.get("prompt_tokens") or 0)
                tokens_out = (tokens_out or 0) + (answer.usage.get("completion_tokens") or 0)
            if answer.timed_out or not answer.calls:
                break
            if round_number == rounds:
                raise too_many_rounds(self.name, rounds)
            messages.append(
                {
                    "role": "assistant",
                    "content": answer.text or None,
                    "tool_calls": [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments},
                        }
                        for call in answer.calls
                    ],
                }
            )
            for call in answer.calls:
                arguments = parsed_arguments(call.arguments)
                result = call_tool(request.tools, call.name, call.arguments)
                events.append(
                    tool_event(on_chunk, call.name, summarize_arguments(arguments), ok=result.ok)
                )
                messages.append(
                    {"role": "tool", "tool_call_id": call.id, "content": result.content}
                )
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
            **(self.options.get("extra_body") or {}),
            "model": model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        for name in ("temperature", "max_tokens", "top_p", "seed"):
            if name in self.options:
                body[name] = self.options[name]
        if request.output_schema and self.structured_output == "enforced":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": request.output_schema},
            }
        if request.tools:
            body["tools"] = [
                {"type": "function", "function": spec} for spec in request.tools.specs()
            ]
        return body

    def _ask(self, body: dict, key: str, request: AgentRequest, on_chunk: OnChunk) -> _Answer:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        stream = HttpStream(
            self.name,
            self.url,
            headers=headers,
            body=body,
            on_chunk=on_chunk,
            idle_timeout=request.idle_timeout,
        )
        parts: list[str] = []
        calls: dict[int, _ToolCall] = {}
        answer = _Answer()
        for event in stream.events():
            if event.data.strip() == "[DONE]":
                break
            chunk = self._parse(event.data)
            if chunk.get("usage"):
                answer.usage = chunk["usage"]
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                text = delta.get("content") or ""
                if text:
                    parts.append(text)
                    on_chunk(text)
                for piece in delta.get("tool_calls") or []:
                    call = calls.setdefault(int(piece.get("index") or 0), _ToolCall())
                    call.id = piece.get("id") or call.id
                    function = piece.get("function") or {}
                    call.name = function.get("name") or call.name
                    call.arguments += function.get("arguments") or ""
        answer.text = "".join(parts)
        answer.calls = [calls[index] for index in sorted(calls)]
        answer.timed_out = stream.timed_out
        return answer

    def _parse(self, data: str) -> dict:
        chunk = json_event(self.name, data, "a line")
        if chunk.get("error"):
            message = stream_error_message(self.name, chunk["error"])
            raise ProviderError(message, permanent=False)
        return chunk
