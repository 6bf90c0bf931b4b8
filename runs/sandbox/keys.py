"""An agent CLI never holds its provider's key: it talks to its API through the worker.

A CLI needs its vendor's API, and the API needs the key. Handing the CLI the key would let
a prompt-injected agent print it, or send it anywhere (its sandbox has the network). So
for each call the worker opens a small reverse proxy on 127.0.0.1, under a path only this
call knows (`http://127.0.0.1:PORT/<secret>`). The CLI is told that address as its base
URL, and a stand-in key; the proxy checks the path, puts the real key in place of the
stand-in and forwards the request, streaming the answer back as it comes. The real key
stays in the worker. Without a key in the worker (the CLI logs in its own way) there is
nothing to hide and no proxy.

A provider kind declares what its CLI reads (`KeyRoute`): the variable holding the key,
the variable naming the base URL, the vendor's default URL and the header the key goes in.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

from .environment import inherited

log = logging.getLogger(__name__)
# Headers that belong to one connection, not to the request or answer passed on.
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
}
KEY_HEADERS = {"x-api-key", "authorization", "x-goog-api-key", "api-key"}
STAND_IN = "loop-console-proxied-key"


@dataclass(frozen=True)
class KeyRoute:
    key_env: str  # e.g. ANTHROPIC_API_KEY
    base_url_env: str  # e.g. ANTHROPIC_BASE_URL
    default_base_url: str  # e.g. https://api.anthropic.com
    header: str  # e.g. x-api-key
    prefix: str = ""  # e.g. "Bearer " for an Authorization header

    def upstream(self, env: dict[str, str]) -> str:
        return (env.get(self.base_url_env) or self.default_base_url).rstrip("/")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _ProxyServer

    def log_message(self, fmt, *args):  # the worker's log, not stderr
        log.debug("key proxy: " + fmt, *args)

    def _forward(self):
        prefix = f"/{self.server.secret}"
        if not self.path.startswith(prefix + "/") and self.path != prefix:
            self.send_error(404)
            return
        route = self.server.route
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {
            name: value
            for name, value in self.headers.items()
            if name.lower() not in HOP_BY_HOP | KEY_HEADERS | {"content-length"}
        }
        headers[route.header] = route.prefix + self.server.key
        url = self.server.upstream + self.path[len(prefix) :]
        started = False
        try:
            with self.server.client.stream(
                self.command, url, headers=headers, content=body
            ) as answer:
                started = True
                self.send_response(answer.status_code)
                for name, value in answer.headers.multi_items():
                    if name.lower() not in HOP_BY_HOP | {"content-length"}:
                        self.send_header(name, value)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for chunk in answer.iter_raw():
                    if chunk:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
        except httpx.HTTPError as exc:
            log.warning("key proxy: %s %s failed: %s", self.command, url, exc)
            if started:  # the answer was cut short: the CLI sees a broken stream
                self.close_connection = True
            else:
                self.send_error(502, "the provider's API could not be reached")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, route: KeyRoute, upstream: str, key: str):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.route = route
        self.upstream = upstream
        self.key = key
        self.secret = secrets.token_urlsafe(24)
        self.client = httpx.Client(timeout=httpx.Timeout(600, connect=30))


@contextmanager
def proxied_keys(routes: tuple[KeyRoute, ...], env: dict[str, str]) -> Iterator[dict[str, str]]:
    """For each route whose key the worker holds (or the provider's own `env` sets): a
    proxy while the block runs. Yields the variables the CLI gets instead of the keys (its
    base URL and a stand-in key), to lay over `env`."""
    servers: list[_ProxyServer] = []
    given: dict[str, str] = {}
    try:
        for route in routes:
            key = env.get(route.key_env) or inherited(route.key_env).get(route.key_env)
            if not key or route.base_url_env in given:
                continue
            server = _ProxyServer(route, route.upstream(env), key)
            threading.Thread(target=server.serve_forever, name="key-proxy", daemon=True).start()
            servers.append(server)
            port = server.server_address[1]
            given[route.base_url_env] = f"http://127.0.0.1:{port}/{server.secret}"
            given[route.key_env] = STAND_IN
        yield given
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
            server.client.close()
