"""The OpenCode CLI headless: `opencode run --format json`.

The prompt goes in on stdin. Events, one JSON object a line, each with the `sessionID` (the
session to continue with `--session <id>`): `step_start`, `text` (a finished text part),
`tool_use` (a tool's call with its state), `step_finish` (tokens and cost of the step) and
`error`. Structured output is best effort (OpenCode has no schema flag).

OpenCode reads no base-URL variable: the call's configuration file (OPENCODE_CONFIG, merged
over the user's own) sets the provider's `baseURL`, the key proxy's when the worker holds
the key (`anthropic/...` models: ANTHROPIC_API_KEY, `openai/...`: OPENAI_API_KEY), and
declares the console's tools as a local MCP server, which OpenCode names `loop_<tool>`.
"""

from __future__ import annotations

import json
from decimal import Decimal

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

# OpenCode's provider id, the key it reads, and the path its SDK adds to the vendor's host.
VENDORS = {
    "anthropic": (
        KeyRoute(
            "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "https://api.anthropic.com", "x-api-key"
        ),
        "/v1",
    ),
    "openai": (
        KeyRoute(
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            "https://api.openai.com/v1",
            "authorization",
            "Bearer ",
        ),
        "",
    ),
}
TOOL_PREFIX = f"{MCP_SERVER_NAME}_"


class OpenCodeProvider(CliAgentProvider):
    default_program = "opencode"
    config_dirs = ("OPENCODE_CONFIG_DIR",)
    structured_output = "best_effort"

    def argv(self, request: AgentRequest) -> list[str]:
        argv = self.program() + ["run", "--format", "json"]
        model = request.model or self.model
        if model:
            argv += ["--model", model]
        if request.session_id:
            argv += ["--session", request.session_id]
        if self.options.get("agent"):
            argv += ["--agent", str(self.options["agent"])]
        elif request.read_only:
            argv += ["--agent", "plan"]
        if request.auto_approve and not request.read_only:
            argv += ["--auto"]
        return argv + [str(a) for a in self.options.get("args") or []]

    def config(self, space: CallSpace, tool_env: dict, env: dict) -> dict:
        """The call's OpenCode configuration: base URLs, and the console's MCP server."""
        config: dict = {"$schema": "https://opencode.ai/config.json"}
        providers = {}
        for vendor, (route, suffix) in VENDORS.items():
            if env.get(route.base_url_env):
                base = env[route.base_url_env].rstrip("/")
                providers[vendor] = {"options": {"baseURL": base + suffix}}
        if providers:
            config["provider"] = providers
        if tool_env:
            server = mcp_server(space, tool_env)
            config["mcp"] = {
                MCP_SERVER_NAME: {
                    "type": "local",
                    "command": [server["command"], *server["args"]],
                    "environment": server["env"],
                    "enabled": True,
                }
            }
        return config

    def _run(
        self, request: AgentRequest, on_chunk: OnChunk, space: CallSpace, tool_env: dict
    ) -> AgentResult:
        turn = _Turn(request, on_chunk)
        parser = JsonLines(on_chunk, turn.handle)
        routes = tuple(route for route, _ in VENDORS.values())
        env = {
            **inherited("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "OPENCODE_CONFIG_DIR"),
            **request.env,
            **(self.options.get("env") or {}),
            **tool_env,
        }
        with proxied_keys(routes, env) as keys:
            env = {**env, **keys}
            config = self.config(space, tool_env, env)
            env["OPENCODE_CONFIG"] = space.write("opencode.json", json.dumps(config))
            process = self.run_cli(self.argv(request), request, space, env, parser)
        if process.timed_out:
            return AgentResult(
                text=turn.text, session_id=turn.session_id, timed_out=True, tool_calls=turn.tools
            )
        failure = turn.failure or (
            None if process.exit_code == 0 else parser.stray_tail() or "no output"
        )
        if failure is not None or not turn.finished:
            message = failure or parser.stray_tail() or "the run ended without finishing a step"
            raise ProviderError(
                f"provider '{self.name}': opencode exited with status {process.exit_code}: "
                f"{message}",
                permanent=not looks_transient(message),
            )
        model = request.model or self.model
        return AgentResult(
            text=turn.text,
            session_id=turn.session_id,
            tokens_in=turn.tokens_in,
            tokens_out=turn.tokens_out,
            cost_usd=Decimal(str(turn.cost)).quantize(Decimal("0.000001"))
            if turn.cost
            else pricing.cost(self.options, turn.tokens_in, turn.tokens_out, model),
            tool_calls=turn.tools,
        )


class _Turn:
    """What one `opencode run` said, assembled from its events."""

    def __init__(self, request: AgentRequest, on_chunk: OnChunk):
        self.on_chunk = on_chunk
        self.session_id = request.session_id or ""
        self.parts: list[str] = []
        self.tools: list[dict] = []
        self.tokens_in = 0
        self.tokens_out = 0
        self.cost = 0.0
        self.finished = False
        self.failure: str | None = None

    @property
    def text(self) -> str:
        return "\n".join(p.rstrip("\n") for p in self.parts)

    def handle(self, event: dict) -> None:
        kind = event.get("type")
        part = event.get("part") or {}
        if event.get("sessionID"):
            self.session_id = event["sessionID"]
        if kind == "text" and part.get("text"):
            self.parts.append(part["text"])
            self.on_chunk(part["text"] + ("" if part["text"].endswith("\n") else "\n"))
        elif kind == "tool_use":
            state = part.get("state") or {}
            # The console's own tools read by their own names in the event log.
            name = str(part.get("tool") or "tool").removeprefix(TOOL_PREFIX)
            self.tools.append(
                tool_event(self.on_chunk, name, summarize_arguments(state.get("input")))
            )
        elif kind == "step_finish":
            self.finished = True
            tokens = part.get("tokens") or {}
            cache = tokens.get("cache") or {}
            self.tokens_in += (tokens.get("input") or 0) + (cache.get("read") or 0)
            self.tokens_out += tokens.get("output") or 0
            self.cost += part.get("cost") or 0
        elif kind == "error":
            error = event.get("error") or {}
            data = error.get("data") or {}
            self.failure = str(data.get("message") or error.get("name") or error or event)
