"""Static files through the ASGI application (what uvicorn serves): complete, and without
Django's warning about synchronous iterators in the server log."""

import asyncio
import warnings
from concurrent.futures import ThreadPoolExecutor

from django.core.asgi import get_asgi_application

from tests.conftest import ROOT


def _get(path: str) -> list[dict]:
    app = get_asgi_application()
    sent: list[dict] = []
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost")],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
    }

    requests = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive():
        if requests:
            return requests.pop()
        await asyncio.Event().wait()  # the client stays connected until the answer is sent

    async def send(message):
        sent.append(message)

    # In a thread of its own: a browser test earlier in the session may have left an
    # event loop running in this one.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, app(scope, receive, send)).result()
    return sent


def test_a_stylesheet_is_served_whole_and_without_the_streaming_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sent = _get("/static/css/console.css")
    start = next(m for m in sent if m["type"] == "http.response.start")
    assert start["status"] == 200
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    assert body == (ROOT / "static" / "css" / "console.css").read_bytes()
    assert not [w for w in caught if "StreamingHttpResponse" in str(w.message)]
