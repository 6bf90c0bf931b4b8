"""The Gemini CLI headless: `gemini -p "" --output-format stream-json`.

The prompt goes in on stdin (`-p` appends its own, empty, text to it). Events, one JSON
object a line: `init` (session id, model), `message` (the assistant's text, streamed as
`delta` pieces), `tool_use` / `tool_result`, `error` and a final `result` (status, and
`stats` with the tokens). Threaded iterations continue with `--resume <session id>`.
Structured output is best effort; Gemini CLI reports no cost (pricing.py may).

Gemini CLI reads its base URL from GOOGLE_GEMINI_BASE_URL, but then takes the call for a
gateway it refuses in headless mode unless its settings pick the API-key method. The call
writes those settings (GEMINI_CLI_SYSTEM_SETTINGS_PATH, laid over the user's) in its private
folder: the API-key method when a key is given, and the console's tools as a trusted MCP
server (`trust`: headless mode has nobody to confirm a call).
"""

from __future__ import annotations

import json

from runs.agent_tools.serve import MCP_SERVER_NAME, mcp_server
from runs.sandbox import CallSpace, inherited
from runs.sandbox.keys import KeyRoute, proxied_keys

from . import pricing
from .activity import summarize_arguments, tool_event
from .base import AgentRequest, AgentResult, OnChunk, ProviderError
from .cli import (
    CliAgentProvider,
    JsonLines,
    looks_transient,
)

KEYS = (
    KeyRoute(
        "GEMINI_API_KEY",
        "GOOGLE_GEMINI_BASE_URL",
        "https://generativelanguage.googleapis.com",
        "x-goog-api-key",
    ),
)


class GeminiProvider(CliAgentProvider):
    default_program = "gemini"
    config_dirs = ("GEMINI_CLI_HOME",)
    structured_output = "best_effort"

    def argv(self, request: AgentRequest) -> list[str]:
        argv = self.program() + ["-p", "", "--output-format", "stream-json", "--skip-trust"]
        model = request.model or self.model
        if model:
            argv += ["--model", model]
        if request.session_id:
            argv += ["--resume", request.session_id]
        if self.options.get("approval_mode"):
            argv += ["--approval-mode", str(self.options["approval_mode"])]
        elif request.read_only:
            argv += ["--approval-mode", "plan"]
        elif request.auto_approve:
            argv += ["--approval-mode", "yolo"]
        return argv + [str(a) for a in self.options.get("args") or []]

    def settings(self, space: CallSpace, tool_env: dict, env: dict) -> dict:
        settings: dict = {}
        if env.get("GEMINI_API_KEY"):
            settings["security"] = {"auth": {"selectedType": "gemini-api-key"}}
        if tool_env:
            server = mcp_server(space, tool_env)
            settings["mcpServers"] = {MCP_SERVER_NAME: {**server, "trust": True}}
        return settings

    def _run(
        self, request: AgentRequest, on_chunk: OnChunk, space: CallSpace, tool_env: dict
    ) -> AgentResult:
        turn = _Turn(request, on_chunk)
        parser = JsonLines(on_chunk, turn.handle)
        env = {
            **inherited("GOOGLE_GEMINI_BASE_URL", "GEMINI_CLI_HOME"),
            **request.env,
            **(self.options.get("env") or {}),
            **tool_env,
        }
        with proxied_keys(KEYS, env) as keys:
            env = {**env, **keys}
            settings = self.settings(space, tool_env, env)
            if settings:
                path = space.write("gemini-settings.json", json.dumps(settings))
                env["GEMINI_CLI_SYSTEM_SETTINGS_PATH"] = path
            process = self.run_cli(self.argv(request), request, space, env, parser)
        if process.timed_out:
            return AgentResult(
                text=turn.text, session_id=turn.session_id, timed_out=True, tool_calls=turn.tools
            )
        final = turn.final
        if final is None or final.get("status") != "success" or process.exit_code != 0:
            error = (final or {}).get("error") or {}
            message = (
                error.get("message") or turn.failure or parser.stray_tail() or "no result message"
            )
            raise ProviderError(
                f"provider '{self.name}': gemini exited with status {process.exit_code}: {message}",
                permanent=not looks_transient(message),
            )
        stats = final.get("stats") or {}
        tokens_in, tokens_out = stats.get("input_tokens"), stats.get("output_tokens")
        return AgentResult(
            text=turn.text,
            session_id=turn.session_id,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=pricing.cost(self.options, tokens_in, tokens_out, request.model or self.model),
            tool_calls=turn.tools,
        )


class _Turn:
    """What one `gemini -p` call said, assembled from its events."""

    def __init__(self, request: AgentRequest, on_chunk: OnChunk):
        self.on_chunk = on_chunk
        self.session_id = request.session_id or ""
        self.parts: list[str] = []
        self.tools: list[dict] = []
        self.final: dict | None = None
        self.failure: str | None = None

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def handle(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "init" and event.get("session_id"):
            self.session_id = event["session_id"]
        elif kind == "message" and event.get("role") == "assistant" and event.get("content"):
            self.parts.append(event["content"])
            self.on_chunk(event["content"])
        elif kind == "tool_use":
            # The console's own tools read by their own names in the event log.
            name = str(event.get("tool_name") or "tool")
            for prefix in (f"mcp_{MCP_SERVER_NAME}_", f"{MCP_SERVER_NAME}__"):
                name = name.removeprefix(prefix)
            detail = summarize_arguments(event.get("parameters"))
            self.tools.append(tool_event(self.on_chunk, name, detail))
        elif kind == "error":
            self.failure = str(event.get("message") or event)
        elif kind == "result":
            self.final = event
