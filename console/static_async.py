"""Static files under the ASGI server without Django's "StreamingHttpResponse must consume
synchronous iterators" warning on every stylesheet and script.

WhiteNoise answers with a FileResponse whose file is read synchronously; under ASGI Django
then warns and reads it in a thread. Wrapped here as an asynchronous iterator, the file
is read in a thread chunk by chunk all the same, and nothing is logged. Under WSGI the
response passes through untouched.
"""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import FileResponse

CHUNK = 64 * 1024


async def _chunks(filelike):
    read = sync_to_async(filelike.read, thread_sensitive=False)
    while True:
        chunk = await read(CHUNK)
        if not chunk:
            break
        yield chunk


def _wrap(request, response):
    stream = getattr(response, "file_to_stream", None)
    if (
        isinstance(request, ASGIRequest)
        and isinstance(response, FileResponse)
        and not response.is_async
        and stream is not None
    ):
        response.streaming_content = _chunks(stream)
    return response


class AsyncStaticFilesMiddleware:
    # WhiteNoise below is sync-only, so under ASGI Django runs this middleware in a thread
    # too: the request type, not the calling style, says whether to wrap.
    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self._async_call(request)
        return _wrap(request, self.get_response(request))

    async def _async_call(self, request):
        return _wrap(request, await self.get_response(request))
