"""Driving the orchestration MCP server with the MCP SDK's own client, over streamable HTTP
(against the console served by uvicorn) and over stdio (`manage.py mcp`)."""

from __future__ import annotations

import asyncio
import os
import sys
import threading

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from console.models import ApiToken
from tests.conftest import ROOT


def run_async(make_coroutine):
    """`asyncio.run` on a thread of its own: in a process that also ran the browser tests,
    Playwright keeps an event loop running on this one, where asyncio.run refuses."""
    outcome: dict = {}

    def go():
        try:
            outcome["value"] = asyncio.run(make_coroutine())
        except BaseException as exc:  # noqa: BLE001 - raised again on the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=go, name="mcp-client")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def token(user, scope: str = "operate", **fields) -> str:
    return ApiToken.issue(user, name="mcp tests", scope=scope, **fields)[1]


class McpHttp:
    """Calls to /mcp with one API token, each through a fresh SDK client session."""

    def __init__(self, server: str, secret: str):
        self.url = server + "/mcp"
        self.secret = secret

    async def _with_client(self, work):
        headers = {"Authorization": f"Bearer {self.secret}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            async with Client(streamable_http_client(self.url, http_client=http)) as client:
                return await work(client)

    def call(self, tool: str, **arguments):
        return run_async(lambda: self._with_client(lambda c: c.call_tool(tool, arguments)))

    def tool_names(self) -> list[str]:
        async def names(client):
            return [t.name for t in (await client.list_tools()).tools]

        return run_async(lambda: self._with_client(names))


def stdio_parameters(worker_env: dict, *args: str) -> StdioServerParameters:
    """`manage.py mcp ...` on the test database, as an MCP client configuration says it."""
    return StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp", *args],
        cwd=str(ROOT),
        env={**worker_env, "PATH": os.environ.get("PATH", "")},
    )


def stdio_calls(parameters: StdioServerParameters, calls: list[tuple[str, dict]]) -> list:
    """One stdio session (one server process) making these tool calls in order."""

    async def go():
        async with Client(parameters, read_timeout_seconds=120) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    return run_async(go)


@pytest.fixture
def guided_gate(live_worker, bundled, operator):
    """guided-refine started by otto and paused at its first gate (its iteration signalled
    completion)."""
    from runs import services
    from runs.actor import Actor
    from tests.conftest import pending_gate, wait_run

    run = services.start_run(
        bundled["guided-refine"], actor=Actor.operator(operator, "console"), message="the sea"
    )
    wait_run(run, "paused", "failed", "completed")
    assert run.status == "paused", run.error
    return run, pending_gate(run)
