"""The Codex CLI's non-interactive JSON mode: `codex exec --json`.

The prompt goes in on stdin. Events: `thread.started` (thread id, the session to resume
with `codex exec resume <id>`), `item.started` / `item.completed` (agent_message text,
command_execution, file_change, ...), `turn.completed` (usage), `turn.failed` / `error`.
Structured output is enforced with `--output-schema <file>`.

The console's tools (`AgentRequest.tools`) reach Codex as an MCP server declared with
`-c mcp_servers.loop.*` overrides for this call only: the tools relay's `mcp` as the command,
and the call's tool variables forwarded by name (`env_vars`, from Codex's own environment:
Codex starts MCP servers with a cleared environment, and the token stays off the command
line). Its calls come back as `mcp_tool_call` items.

Codex does not read OPENAI_BASE_URL for its built-in OpenAI provider: when a base URL is
set (the key proxy's, or the administrator's), the call declares a provider of its own with
`-c model_providers.console.*` (base_url, the key's variable as env_key, the Responses
wire API) and selects it. The proxy's secret path is then on the command line, which only
the call's own sandbox (its PID namespace) can read.
"""

from __future__ import annotations

import json

from runs.agent_tools.serve import MCP_SERVER_NAME, mcp_server
from runs.sandbox import CallSpace, inherited
from runs.sandbox.keys import KeyRoute, proxied_keys

from . import pricing
from .activity import tool_event
from .base import AgentRequest, AgentResult, OnChunk, ProviderError
from .cli import (
    CliAgentProvider,
    JsonLines,
    looks_transient,
)

# The key stays in the worker: the CLI reaches the API through runs.sandbox.keys (Codex
# prefers CODEX_API_KEY in `exec` mode, then OPENAI_API_KEY).
KEYS = tuple(
    KeyRoute(name, "OPENAI_BASE_URL", "https://api.openai.com/v1", "authorization", "Bearer ")
    for name in ("CODEX_API_KEY", "OPENAI_API_KEY")
)
# The name of the model provider a call declares for its base URL (provider_overrides).
PROVIDER_ID = "console"


class CodexProvider(CliAgentProvider):
    default_program = "codex"
    config_dirs = ("CODEX_HOME",)
    structured_output = "enforced"

    def argv(
        self,
        request: AgentRequest,
        schema_path: str | None,
        tool_env: dict | None = None,
        space: CallSpace | None = None,
        env: dict | None = None,
    ) -> list[str]:
        argv = self.program() + ["exec", "--json", "--skip-git-repo-check"]
        argv += provider_overrides(env or {})
        model = request.model or self.model
        if model:
            argv += ["--model", model]
        if self.options.get("sandbox"):
            argv += ["--sandbox", str(self.options["sandbox"])]
        elif request.read_only:
            argv += ["--sandbox", "read-only"]
        elif request.auto_approve:
            # The call already runs in the console's sandbox (the case this flag is for);
            # Codex's own sandbox would nest inside it. `--full-auto` is gone from `exec`.
            argv += ["--dangerously-bypass-approvals-and-sandbox"]
        if schema_path:
            argv += ["--output-schema", schema_path]
        if tool_env and space is not None:
            argv += mcp_overrides(space, tool_env)
        argv += [str(a) for a in self.options.get("args") or []]
        if request.session_id:
            argv += ["resume", request.session_id]
        return argv

    def run(self, request: AgentRequest, on_chunk: OnChunk) -> AgentResult:
        with self.call_space(request) as (space, tool_env):
            schema_path = None
            if request.output_schema:
                schema_path = space.write("schema.json", json.dumps(request.output_schema))
            return self._run(request, on_chunk, schema_path, space, tool_env)

    def _run(
        self,
        request: AgentRequest,
        on_chunk: OnChunk,
        schema_path: str | None,
        space: CallSpace,
        tool_env: dict,
    ):
        turn = _Turn(request, on_chunk)
        parser = JsonLines(on_chunk, turn.handle)
        env = {
            **inherited("OPENAI_BASE_URL", "CODEX_HOME"),
            **request.env,
            **(self.options.get("env") or {}),
            **tool_env,
        }
        with proxied_keys(KEYS, env) as keys:
            process = self.run_cli(
                self.argv(request, schema_path, tool_env, space, {**env, **keys}),
                request,
                space,
                {**env, **keys},
                parser,
            )
        if process.timed_out:
            return AgentResult(
                text=turn.answer(False),
                session_id=turn.thread_id,
                timed_out=True,
                tool_calls=turn.tools,
            )
        failure = turn.failure or (
            None if process.exit_code == 0 else parser.stray_tail() or "no output"
        )
        if failure is not None or not turn.completed:
            message = failure or "the turn ended without completing"
            raise ProviderError(
                f"provider '{self.name}': codex exited with status {process.exit_code}: {message}",
                permanent=not looks_transient(message),
            )
        usage = turn.usage
        tokens_in = usage.get("input_tokens")
        tokens_out = usage.get("output_tokens")
        return AgentResult(
            text=turn.answer(bool(request.output_schema)),
            session_id=turn.thread_id or request.session_id or "",
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=pricing.cost(self.options, tokens_in, tokens_out, request.model or self.model),
            tool_calls=turn.tools,
        )


def provider_overrides(env: dict[str, str]) -> list[str]:
    """`-c` overrides that send the call to OPENAI_BASE_URL with the key variable it has."""
    base_url = env.get("OPENAI_BASE_URL")
    key_env = next((route.key_env for route in KEYS if env.get(route.key_env)), None)
    if not base_url or not key_env:
        return []
    prefix = f"model_providers.{PROVIDER_ID}"
    return [
        *("-c", f"model_provider={json.dumps(PROVIDER_ID)}"),
        *("-c", f"{prefix}.name={json.dumps('Loop Console')}"),
        *("-c", f"{prefix}.base_url={json.dumps(base_url)}"),
        *("-c", f"{prefix}.env_key={json.dumps(key_env)}"),
        *("-c", f'{prefix}.wire_api="responses"'),
    ]


def mcp_overrides(space: CallSpace, tool_env: dict[str, str]) -> list[str]:
    """`-c` overrides (TOML values) that declare the console's MCP server for one call."""
    server = mcp_server(space, tool_env)
    prefix = f"mcp_servers.{MCP_SERVER_NAME}"
    return [
        "-c",
        f"{prefix}.command={json.dumps(server['command'])}",
        "-c",
        f"{prefix}.args={json.dumps(server['args'])}",
        "-c",
        f"{prefix}.env_vars={json.dumps(sorted(tool_env))}",
    ]


class _Turn:
    def __init__(self, request: AgentRequest, on_chunk: OnChunk):
        self.request = request
        self.on_chunk = on_chunk
        self.thread_id = ""
        self.messages: list[str] = []
        self.usage: dict = {}
        self.completed = False
        self.failure: str | None = None
        self.tools: list[dict] = []

    def answer(self, structured: bool) -> str:
        # With a schema only the last message is constrained to it; otherwise every agent
        # message is part of the answer (earlier ones narrate the work).
        if structured:
            return self.messages[-1] if self.messages else ""
        return "\n".join(m.rstrip("\n") for m in self.messages)

    def handle(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "thread.started":
            self.thread_id = event.get("thread_id") or ""
        elif kind == "item.completed":
            self._item(event.get("item") or {})
        elif kind == "turn.completed":
            self.completed = True
            self.usage = event.get("usage") or {}
        elif kind == "turn.failed":
            self.failure = str((event.get("error") or {}).get("message") or event)
        elif kind == "error":
            self.failure = str(event.get("message") or event)

    def _item(self, item: dict) -> None:
        kind = item.get("type") or item.get("item_type")
        if kind in ("agent_message", "assistant_message"):
            text = item.get("text") or ""
            self.messages.append(text)
            self.on_chunk(text + ("" if text.endswith("\n") else "\n"))
        elif kind == "command_execution":
            self.tools.append(
                tool_event(
                    self.on_chunk,
                    "command",
                    item.get("command") or "",
                    exit_code=item.get("exit_code"),
                )
            )
        elif kind == "file_change":
            paths = ", ".join(c.get("path", "") for c in item.get("changes") or [])
            self.tools.append(tool_event(self.on_chunk, "file_change", paths))
        elif kind == "mcp_tool_call" and item.get("server") == MCP_SERVER_NAME:
            # The console's own tools read by their own names in the event log.
            detail = json.dumps(item.get("arguments") or {}, ensure_ascii=False)[:200]
            self.tools.append(tool_event(self.on_chunk, str(item.get("tool") or "tool"), detail))
        elif kind in ("mcp_tool_call", "web_search"):
            detail = item.get("tool") or item.get("query") or ""
            self.tools.append(tool_event(self.on_chunk, kind, str(detail)))
