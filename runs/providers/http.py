"""Streaming HTTP for the API providers: heartbeats, cancel, idle timeout, error mapping.

The request runs in a reader thread that hands lines over a queue, so the worker thread
keeps calling `on_chunk("")` (which raises Cancelled when the iteration was cancelled)
even while the server is silent. Errors become ProviderErrors that say whether a retry
could help: connection trouble, 408/409/429 and 5xx are transient; other 4xx are permanent.
The stored error never carries the response body (viewers read it); the log does.
"""

from __future__ import annotations

import json
import logging
import queue
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http import HTTPStatus

import httpx
from django.core.exceptions import ImproperlyConfigured

from console.secrets import secret

from .base import OnChunk, ProviderError
from .policy import key_env_problem

HEARTBEAT_SECONDS = 0.5
CONNECT_TIMEOUT = 15.0
TRANSIENT_STATUS = {408, 409, 425, 429}
_END = object()
logger = logging.getLogger(__name__)


@dataclass
class SseEvent:
    event: str  # "" when the server sent no `event:` line (OpenAI style)
    data: str


def api_key(provider: str, env_name: str | None, *, required: bool, kind: str | None) -> str:
    """The key from the environment variable the configuration names, or from the file its
    `NAME_FILE` names (never stored)."""
    if not env_name:
        if required:
            raise ProviderError(
                f"provider '{provider}': no API key configured: set `api_key_env` to the name "
                "of the environment variable that holds the key"
            )
        return ""
    # Checked again here (validation and the admin form refuse it first) so that a recipe
    # stored before the rule, or a row written around the form, still cannot read a secret.
    if problem := key_env_problem(env_name, kind):
        raise ProviderError(f"provider '{provider}': api_key_env refused: {problem}")
    try:
        value = secret(env_name)
    except ImproperlyConfigured as exc:
        raise ProviderError(f"provider '{provider}': {exc}") from None
    if not value and required:
        raise ProviderError(
            f"provider '{provider}': the environment variable {env_name} (api_key_env) is not "
            f"set in the worker's environment, nor {env_name}_FILE"
        )
    return value


def error_message(body: bytes) -> str:
    """The provider's own words from an error body (OpenAI and Anthropic shapes)."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text[:500]
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            return str(err.get("message") or err.get("type") or err)[:500]
        if isinstance(err, str):
            return err[:500]
        if data.get("message"):
            return str(data["message"])[:500]
    return text[:500]


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "error"


def retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (seconds or an HTTP date), None if absent or odd."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(min(int(value), 24 * 3600))
    try:
        from email.utils import parsedate_to_datetime

        seconds = parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(0.0, min(seconds, 24 * 3600.0))


def status_error(
    provider: str, status: int, url: str, body: bytes, wait: str | None = None
) -> ProviderError:
    """The stored error says the status and its standard reason only: it is shown to every
    viewer of the run, and the body may be anything the endpoint chose to answer (an
    internal service's page, a reflected secret). The body goes to the worker's log."""
    transient = status in TRANSIENT_STATUS or status >= 500
    logger.warning("provider %r: HTTP %s from %s: %s", provider, status, url, error_message(body))
    hint = " (the API key was refused: check api_key_env)" if status in (401, 403) else ""
    kind = _error_type(body)
    said = f" ({kind})" if kind else ""
    return ProviderError(
        f"provider '{provider}': HTTP {status} {_reason(status)}{said}{hint}; "
        "the response is in the worker's log",
        permanent=not transient,
        status=status,
        retry_after=retry_after(wait),
    )


def _error_type(body: bytes) -> str:
    """The error's type when the API names one as a plain identifier (rate_limit_error,
    overloaded_error): the provider's own word, which is safe to show every viewer."""
    try:
        data = json.loads(body.decode("utf-8", errors="replace"))
    except ValueError:
        return ""
    err = data.get("error") if isinstance(data, dict) else None
    kind = err.get("type") or err.get("code") if isinstance(err, dict) else None
    return kind if isinstance(kind, str) and re.fullmatch(r"[A-Za-z_]{1,40}", kind) else ""


def stream_error_message(provider: str, err: object) -> str:
    """An `error` event sent mid-stream, said without the server's free text: only its
    type when that is a plain identifier (e.g. overloaded_error); the rest is logged."""
    logger.warning("provider %r: error event in the stream: %s", provider, str(err)[:2000])
    kind = err.get("type") if isinstance(err, dict) else None
    if isinstance(kind, str) and re.fullmatch(r"[A-Za-z_]{1,40}", kind):
        return f"provider '{provider}': the server reported {kind} mid-answer"
    return f"provider '{provider}': the server reported an error mid-answer"


class HttpStream:
    """POST a JSON body and read the streamed answer line by line."""

    def __init__(
        self,
        provider: str,
        url: str,
        *,
        headers: dict[str, str],
        body: dict,
        on_chunk: OnChunk,
        idle_timeout: float,
    ):
        self.provider = provider
        self.url = url
        self.headers = headers
        self.body = body
        self.on_chunk = on_chunk
        self.idle_timeout = idle_timeout
        self.timed_out = False
        self._lines: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._response: httpx.Response | None = None

    def lines(self) -> Iterator[str]:
        thread = threading.Thread(target=self._pump, daemon=True)
        thread.start()
        last_data = time.monotonic()
        try:
            while True:
                try:
                    item = self._lines.get(timeout=HEARTBEAT_SECONDS)
                except queue.Empty:
                    self.on_chunk("")  # heartbeat; raises Cancelled when the work is gone
                    if self.idle_timeout and time.monotonic() - last_data > self.idle_timeout:
                        self.timed_out = True
                        return
                    continue
                if item is _END:
                    return
                if isinstance(item, ProviderError):
                    raise item
                last_data = time.monotonic()
                yield item
        finally:
            self._stop.set()
            response = self._response
            if response is not None:
                try:
                    response.close()
                except Exception:  # noqa: BLE001, S110 - closing from another thread is best effort
                    pass

    def events(self) -> Iterator[SseEvent]:
        """Server-sent events: `event:` / `data:` lines, a blank line ends an event."""
        event, data = "", []
        for line in self.lines():
            if not line:
                if data:
                    yield SseEvent(event, "\n".join(data))
                event, data = "", []
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            elif line.startswith("event:"):
                event = line[6:].strip()
        if data:
            yield SseEvent(event, "\n".join(data))

    def _pump(self) -> None:
        timeout = httpx.Timeout(
            connect=CONNECT_TIMEOUT, read=max(self.idle_timeout, 1.0) + 5, write=30, pool=10
        )
        try:
            with (
                httpx.Client(timeout=timeout) as client,
                client.stream("POST", self.url, headers=self.headers, json=self.body) as response,
            ):
                self._response = response
                if response.status_code >= 400:
                    body = response.read()
                    self._lines.put(
                        status_error(
                            self.provider,
                            response.status_code,
                            self.url,
                            body,
                            response.headers.get("retry-after"),
                        )
                    )
                    return
                for line in response.iter_lines():
                    if self._stop.is_set():
                        return
                    self._lines.put(line)
        # What viewers read says what happened; the URL and the exception go to the log.
        except httpx.TimeoutException:
            logger.warning("provider %s: timed out talking to %s", self.provider, self.url)
            self._put_error("the API did not answer in time", False)
        except httpx.TransportError:
            if not self._stop.is_set():
                logger.warning(
                    "provider %s: connection to %s failed", self.provider, self.url, exc_info=True
                )
                self._put_error("could not connect to the API (see the worker's log)", False)
        except Exception:  # a bug or an unexpected answer: do not retry blindly
            if not self._stop.is_set():
                logger.exception("provider %s: request to %s failed", self.provider, self.url)
                self._put_error("the request failed (see the worker's log)", True)
        finally:
            self._lines.put(_END)

    def _put_error(self, message: str, permanent: bool) -> None:
        self._lines.put(
            ProviderError(f"provider '{self.provider}': {message}", permanent=permanent)
        )


def json_event(provider: str, data: str, what: str = "an event") -> dict:
    """One streamed JSON object; anything else is a (transient) protocol error."""
    try:
        parsed = json.loads(data)
    except ValueError:
        logger.warning("provider %s: %s that is not JSON: %.200s", provider, what, data)
        raise ProviderError(
            f"provider '{provider}': the server sent {what} that is not JSON"
            " (its text is in the worker's log)",
            permanent=False,
        ) from None
    return parsed if isinstance(parsed, dict) else {}
