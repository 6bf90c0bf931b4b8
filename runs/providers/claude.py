"""The Claude Code CLI in print mode: `claude -p --output-format stream-json --verbose`.

The prompt goes in on stdin. Lines of the stream: `system`/`init` (session id),
`assistant` (text and tool_use blocks), `user` (tool results), and a final `result`
(session id, usage, total_cost_usd, is_error, and `structured_output` when a
`--json-schema` was given). Threaded iterations resume the session with `--resume`.

The console's tools (`AgentRequest.tools`) reach Claude Code as an MCP server: while the
call runs, `--mcp-config` names a file in the call's private folder that starts the tools
relay (runs/agent_tools/relay/loop_tools.py `mcp`), and `--allowedTools mcp__loop` lets
print mode call them; Claude reports them as `mcp__loop__<tool>` tool_use blocks.

Claude Code refuses to skip its permission prompts (`bypassPermissions`) for root unless
`IS_SANDBOX=1` says it runs in a sandbox; it always does here (runs/sandbox/), so a worker
running as root sets it.
"""

from __future__ import annotations

import json
import os
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

MCP_PREFIX = f"mcp__{MCP_SERVER_NAME}__"
# The key stays in the worker: the CLI reaches the API through runs.sandbox.keys.
KEYS = (
    KeyRoute("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "https://api.anthropic.com", "x-api-key"),
)


class ClaudeProvider(CliAgentProvider):
    default_program = "claude"
    config_dirs = ("CLAUDE_CONFIG_DIR",)
    structured_output = "enforced"

    def argv(
        self,
        request: AgentRequest,
        tool_env: dict[str, str] | None = None,
        space: CallSpace | None = None,
    ) -> list[str]:
        argv = self.program() + ["-p", "--output-format", "stream-json", "--verbose"]
        model = request.model or self.model
        if model:
            argv += ["--model", model]
        if request.session_id:
            argv += ["--resume", request.session_id]
        if request.output_schema:
            argv += ["--json-schema", json.dumps(request.output_schema)]
        if self.options.get("permission_mode"):
            argv += ["--permission-mode", str(self.options["permission_mode"])]
        elif request.read_only:
            argv += ["--permission-mode", "plan"]
        elif request.auto_approve:
            argv += ["--permission-mode", "bypassPermissions"]
        if tool_env and space is not None:
            server = mcp_server(space, tool_env)
            config = {"mcpServers": {MCP_SERVER_NAME: {"type": "stdio", **server}}}
            argv += ["--mcp-config", space.write("mcp.json", json.dumps(config))]
            argv += ["--allowedTools", f"mcp__{MCP_SERVER_NAME}"]
        return argv + [str(a) for a in self.options.get("args") or []]

    def _run(
        self, request: AgentRequest, on_chunk: OnChunk, space: CallSpace, tool_env: dict
    ) -> AgentResult:
        turn = _Turn(self.name, request, on_chunk)
        parser = JsonLines(on_chunk, turn.handle)
        env = {
            **({"IS_SANDBOX": "1"} if os.geteuid() == 0 else {}),
            **inherited("ANTHROPIC_BASE_URL", "CLAUDE_CONFIG_DIR"),
            **request.env,
            **(self.options.get("env") or {}),
            **tool_env,
        }
        with proxied_keys(KEYS, env) as keys:
            process = self.run_cli(
                self.argv(request, tool_env, space), request, space, {**env, **keys}, parser
            )
        final = turn.final
        if process.timed_out:
            return AgentResult(
                text=turn.text, session_id=turn.session_id, timed_out=True, tool_calls=turn.tools
            )
        if final is None:
            detail = parser.stray_tail() or "no result message"
            raise ProviderError(
                f"provider '{self.name}': claude exited with status {process.exit_code} "
                f"before finishing: {detail}",
                permanent=not looks_transient(detail),
            )
        if final.get("is_error") or process.exit_code not in (0, None):
            message = final.get("result") or final.get("subtype") or parser.stray_tail()
            raise ProviderError(
                f"provider '{self.name}': {message}", permanent=not looks_transient(str(message))
            )
        usage = final.get("usage") or {}
        tokens_in = sum(
            usage.get(k) or 0
            for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        )
        tokens_out = usage.get("output_tokens")
        cost = final.get("total_cost_usd")
        return AgentResult(
            text=final.get("result") if isinstance(final.get("result"), str) else turn.text,
            session_id=final.get("session_id") or turn.session_id,
            structured=final.get("structured_output"),
            tokens_in=tokens_in if usage else None,
            tokens_out=tokens_out,
            cost_usd=Decimal(str(cost)).quantize(Decimal("0.000001"))
            if cost is not None
            else pricing.cost(self.options, tokens_in, tokens_out, request.model or self.model),
            tool_calls=turn.tools,
        )


class _Turn:
    """What one `claude -p` call said, assembled from its stream of events."""

    def __init__(self, provider: str, request: AgentRequest, on_chunk: OnChunk):
        self.provider = provider
        self.request = request
        self.on_chunk = on_chunk
        self.session_id = request.session_id or ""
        self.parts: list[str] = []
        self.tools: list[dict] = []
        self.final: dict | None = None

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def handle(self, event: dict) -> None:
        kind = event.get("type")
        if event.get("session_id"):
            self.session_id = event["session_id"]
        if kind == "assistant":
            for block in (event.get("message") or {}).get("content") or []:
                if block.get("type") == "text" and block.get("text"):
                    self.parts.append(block["text"])
                    self.on_chunk(block["text"])
                elif block.get("type") == "tool_use":
                    # The console's own tools read by their own names in the event log.
                    name = (block.get("name") or "tool").removeprefix(MCP_PREFIX)
                    self.tools.append(
                        tool_event(self.on_chunk, name, summarize_arguments(block.get("input")))
                    )
        elif kind == "result":
            self.final = event
