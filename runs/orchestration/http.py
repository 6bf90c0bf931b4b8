"""The orchestration MCP server over streamable HTTP at /mcp, beside Django in one ASGI app.

`mount(django_app)` answers /mcp itself and hands everything else to Django. A request
to /mcp must carry an API token (`Authorization: Bearer`): an unknown, revoked or expired
one is refused with 401 before the MCP SDK sees the request; the token's person and scope
travel on the request to the tools (runs.orchestration.tools.Caller).

The SDK's session manager runs stateless with JSON responses: every request stands on
its own (no session to lose when the console runs several web processes), and each is
authenticated. It is started with the server (ASGI lifespan) or, under a server that
sends no lifespan events, by the first request to /mcp.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http.request import split_domain_port, validate_host

from console.auth import NO_TOKEN, NOT_VALID, bearer_secret, token_user
from console.models import TokenRefused
from runs.orchestration.tools import Caller, CallerOf, build_server

log = logging.getLogger(__name__)

PATH = "/mcp"


def _authenticate(secret: str):
    from django.db import connection

    try:
        return token_user(secret)
    finally:
        connection.close()


class McpEndpoint:
    """The SDK's session manager behind our token check, started once per event loop."""

    def __init__(self):
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        self.server = build_server(CallerOf())
        self.manager = StreamableHTTPSessionManager(
            app=self.server._lowlevel_server,  # the SDK's documented way to mount it
            json_response=True,
            stateless=True,
        )
        self.running: asyncio.Task | None = None
        self.ready = asyncio.Event()
        self.stop = asyncio.Event()

    async def start(self) -> None:
        if self.running is None:
            self.running = asyncio.create_task(self._run())
        await self.ready.wait()

    async def _run(self) -> None:
        async with self.manager.run():
            self.ready.set()
            await self.stop.wait()

    async def close(self) -> None:
        if self.running is not None:
            self.stop.set()
            with contextlib.suppress(Exception):
                await self.running

    async def __call__(self, scope, receive, send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        if not validate_host(split_domain_port(host)[0], settings.ALLOWED_HOSTS):
            await _answer(send, 400, f"Host {host!r} is not in ALLOWED_HOSTS.")
            return
        secret = bearer_secret(headers)
        if secret is None:
            await _answer(send, 401, NO_TOKEN)
            return
        try:
            user = await sync_to_async(_authenticate, thread_sensitive=False)(secret)
        except TokenRefused as refused:
            await _answer(send, 401, str(refused))
            return
        if user is None:
            await _answer(send, 401, NOT_VALID)
            return
        await self.start()
        scope = {**scope, CallerOf.SCOPE_KEY: Caller(user)}
        await self.manager.handle_request(scope, receive, send)


async def _answer(send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def mount(django_app):
    """One ASGI application: /mcp to the MCP endpoint, everything else to Django; lifespan
    events start and stop the endpoint (Django takes none)."""
    endpoints: dict[asyncio.AbstractEventLoop, McpEndpoint] = {}

    def endpoint() -> McpEndpoint:
        loop = asyncio.get_running_loop()
        if loop not in endpoints:
            endpoints[loop] = McpEndpoint()
        return endpoints[loop]

    async def application(scope, receive, send):
        if scope["type"] == "lifespan":
            await _lifespan(endpoint, receive, send)
        elif scope["type"] == "http" and scope["path"].rstrip("/") == PATH:
            await endpoint()(scope, receive, send)
        else:
            await django_app(scope, receive, send)

    return application


async def _lifespan(endpoint, receive, send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            try:
                await endpoint().start()
            except Exception as exc:  # the console still serves its pages
                log.exception("the MCP endpoint did not start")
                await send({"type": "lifespan.startup.failed", "message": str(exc)})
                return
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await endpoint().close()
            await send({"type": "lifespan.shutdown.complete"})
            return
