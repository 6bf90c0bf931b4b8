"""The vendors' wire formats for tests/providers/fakes/scripted_api.py: how to read a
request into a `Turn`, and the streamed events that say a `Reply`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

ANTHROPIC, RESPONSES, CHAT, GEMINI = "anthropic", "responses", "chat", "gemini"


def vendor_of(path: str) -> str | None:
    if path.endswith(("/v1/messages", "/v1/messages/count_tokens")):
        return ANTHROPIC
    if path.endswith("/responses"):
        return RESPONSES
    if path.endswith("/chat/completions"):
        return CHAT
    if ":streamGenerateContent" in path or ":generateContent" in path or ":countTokens" in path:
        return GEMINI
    return None


def key_of(vendor: str | None, headers: dict, raw_path: str) -> str:
    if vendor == ANTHROPIC:
        return headers.get("x-api-key", "")
    if vendor == GEMINI:
        query = parse_qs(urlsplit(raw_path).query)
        return headers.get("x-goog-api-key") or (query.get("key") or [""])[0]
    return headers.get("authorization", "").removeprefix("Bearer ")


def error_body(vendor: str, status: int, message: str) -> dict:
    if vendor == ANTHROPIC:
        kind = {401: "authentication_error", 429: "rate_limit_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    if vendor == GEMINI:
        return {"error": {"code": status, "message": message, "status": "INVALID_ARGUMENT"}}
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}


def _text(value) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_text(v) for v in value)
    if isinstance(value, dict):
        return str(value.get("text") or value.get("content") or json.dumps(value))
    return str(value)


def _prompt(text: str) -> str | None:
    """A user's own words (the CLIs add context messages wrapped in <tags>)."""
    text = text.strip()
    return text if text and not text.startswith("<") else None


def turn_of(vendor: str, body: dict, path: str):
    from .scripted_api import Turn

    prompts: list[str] = []
    results: list[str] = []
    if vendor == ANTHROPIC:
        tools = [t.get("name", "") for t in body.get("tools") or []]
        for message in body.get("messages") or []:
            if message.get("role") != "user":
                continue
            content = message.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            said = [p for b in blocks if b.get("type") == "text" if (p := _prompt(b["text"]))]
            if said:
                prompts.append("\n".join(said))
                results = []
            results += [_text(b.get("content")) for b in blocks if b.get("type") == "tool_result"]
    elif vendor == RESPONSES:
        # Codex offers an MCP server's tools in a namespace: `mcp__loop/record_handoff`.
        tools = [
            f"{t['name']}/{sub.get('name')}" if t.get("type") == "namespace" else t.get("name")
            for t in body.get("tools") or []
            if t.get("name")
            for sub in (t.get("tools") or [{}] if t.get("type") == "namespace" else [{}])
        ]
        items = body.get("input") or []
        for item in [{"role": "user", "content": items}] if isinstance(items, str) else items:
            if item.get("role") == "user":
                content = item.get("content")
                parts = [content] if isinstance(content, str) else [_text(c) for c in content]
                said = [p for part in parts if (p := _prompt(part))]
                if said:
                    prompts.append("\n".join(said))
                    results = []
            elif item.get("type") == "function_call_output":
                results.append(_text(item.get("output")))
    elif vendor == CHAT:
        tools = [(t.get("function") or {}).get("name", "") for t in body.get("tools") or []]
        for message in body.get("messages") or []:
            if message.get("role") == "user" and (p := _prompt(_text(message.get("content")))):
                prompts.append(p)
                results = []
            elif message.get("role") == "tool":
                results.append(_text(message.get("content")))
    else:
        tools = [
            d.get("name", "")
            for t in body.get("tools") or []
            for d in t.get("functionDeclarations") or []
        ]
        for content in body.get("contents") or []:
            if content.get("role") != "user":
                continue
            parts = content.get("parts") or []
            said = [p for part in parts if (p := _prompt(part.get("text") or ""))]
            if said:
                prompts.append("\n".join(said))
                results = []
            results += [
                json.dumps(part["functionResponse"].get("response"))
                for part in parts
                if "functionResponse" in part
            ]
    model = body.get("model") or path.rsplit("/", 1)[-1].split(":")[0]
    return Turn(vendor=vendor, model=model, prompts=prompts, tools=tools, results=results)


def _words(text: str) -> list[str]:
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)] if text else []


Events = Iterator[tuple[str | None, dict | str]]


def anthropic(turn, reply) -> Events:
    usage = {"input_tokens": reply.tokens_in, "output_tokens": 1}
    message = {"id": "msg_scripted", "type": "message", "role": "assistant", "content": []}
    yield (
        "message_start",
        {
            "type": "message_start",
            "message": {**message, "model": turn.model, "stop_reason": None, "usage": usage},
        },
    )
    index = 0
    if reply.text:
        block = {"type": "text", "text": ""}
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        )
        for word in _words(reply.text):
            delta = {"type": "text_delta", "text": word}
            yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
        if reply.hang:
            return
        yield "content_block_stop", {"type": "content_block_stop", "index": 0}
        index = 1
    if reply.tool:
        block = {"type": "tool_use", "id": "toolu_scripted1", "name": reply.tool, "input": {}}
        yield (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": block,
            },
        )
        delta = {"type": "input_json_delta", "partial_json": json.dumps(reply.arguments)}
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": "tool_use" if reply.tool else "end_turn",
                "stop_sequence": None,
            },
            "usage": {"output_tokens": reply.tokens_out},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def responses(turn, reply) -> Events:
    base = {"id": "resp_scripted", "object": "response", "model": turn.model}
    yield (
        "response.created",
        {
            "type": "response.created",
            "response": {**base, "status": "in_progress", "output": []},
        },
    )
    output = []
    if reply.text:
        item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress"}
        yield (
            "response.output_item.added",
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "content": []},
            },
        )
        for word in _words(reply.text):
            yield (
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "item_id": "msg_1",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": word,
                },
            )
        if reply.hang:
            return
        content = [{"type": "output_text", "text": reply.text, "annotations": []}]
        done = {**item, "status": "completed", "content": content}
        output.append(done)
        yield (
            "response.output_item.done",
            {
                "type": "response.output_item.done",
                "output_index": 0,
                "item": done,
            },
        )
    if reply.tool:
        namespace, _, name = reply.tool.rpartition("/")
        call = {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_scripted1",
            "name": name,
            **({"namespace": namespace} if namespace else {}),
            "arguments": json.dumps(reply.arguments),
            "status": "completed",
        }
        output.append(call)
        yield (
            "response.output_item.done",
            {
                "type": "response.output_item.done",
                "output_index": len(output) - 1,
                "item": call,
            },
        )
    usage = {
        "input_tokens": reply.tokens_in,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": reply.tokens_out,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": reply.tokens_in + reply.tokens_out,
    }
    yield (
        "response.completed",
        {
            "type": "response.completed",
            "response": {**base, "status": "completed", "output": output, "usage": usage},
        },
    )


def chat(turn, reply) -> Events:
    base = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": turn.model}
    yield None, {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    for word in _words(reply.text):
        yield None, {**base, "choices": [{"index": 0, "delta": {"content": word}}]}
    if reply.hang:
        return
    if reply.tool:
        call = {
            "index": 0,
            "id": "call_scripted1",
            "type": "function",
            "function": {"name": reply.tool, "arguments": json.dumps(reply.arguments)},
        }
        yield None, {**base, "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}
    finish = "tool_calls" if reply.tool else "stop"
    yield None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    usage = {
        "prompt_tokens": reply.tokens_in,
        "completion_tokens": reply.tokens_out,
        "total_tokens": reply.tokens_in + reply.tokens_out,
    }
    yield None, {**base, "choices": [], "usage": usage}
    yield None, "[DONE]"


def gemini(turn, reply) -> Events:
    usage = {
        "promptTokenCount": reply.tokens_in,
        "candidatesTokenCount": reply.tokens_out,
        "totalTokenCount": reply.tokens_in + reply.tokens_out,
    }
    for word in _words(reply.text):
        part = {"text": word}
        yield None, {"candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}]}
    if reply.hang:
        return
    parts = [{"functionCall": {"name": reply.tool, "args": reply.arguments}}] if reply.tool else []
    last = {"content": {"role": "model", "parts": parts or [{"text": ""}]}, "index": 0}
    yield (
        None,
        {
            "candidates": [{**last, "finishReason": "STOP"}],
            "usageMetadata": usage,
            "modelVersion": turn.model,
        },
    )


STREAMS = {ANTHROPIC: anthropic, RESPONSES: responses, CHAT: chat, GEMINI: gemini}
