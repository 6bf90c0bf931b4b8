"""Any OpenAI-compatible chat-completions endpoint (OpenAI, Ollama, vLLM, LM Studio,
llama.cpp's server), streamed over server-sent events.

Chat APIs are stateless, so `fresh_context: false` is kept by the console: the history of
a session lives in the database (runs.models.Conversation) and is sent again each turn.
Structured output uses `response_format: json_schema` ("enforced"); a server that ignores
it can be declared `structured_output: best_effort` to get the schema in the prompt and
re-asks instead.
"""

from __future__ import annotations

from . import history
from .base import AgentRequest, AgentResult, OnChunk, ProviderError
from .http import HttpStream, api_key, json_event, stream_error_message


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
        key = api_key(self.name, self.api_key_env, required=bool(self.api_key_env))
        session_id, earlier = history.load(request.session_id)
        messages = list(earlier)
        if not messages and self.options.get("system"):
            messages.append({"role": "system", "content": self.options["system"]})
        messages.append({"role": "user", "content": request.prompt})
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
        usage: dict = {}
        for event in stream.events():
            if event.data.strip() == "[DONE]":
                break
            chunk = self._parse(event.data)
            if chunk.get("usage"):
                usage = chunk["usage"]
            for choice in chunk.get("choices") or []:
                text = (choice.get("delta") or {}).get("content") or ""
                if text:
                    parts.append(text)
                    on_chunk(text)
        return history.finish_turn(
            self,
            session_id,
            messages,
            "".join(parts),
            usage.get("prompt_tokens"),
            usage.get("completion_tokens"),
            timed_out=stream.timed_out,
        )

    def _parse(self, data: str) -> dict:
        chunk = json_event(self.name, data, "a line")
        if chunk.get("error"):
            message = stream_error_message(self.name, chunk["error"])
            raise ProviderError(message, permanent=False)
        return chunk
