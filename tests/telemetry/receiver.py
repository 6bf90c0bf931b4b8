"""A real OTLP/HTTP trace receiver on 127.0.0.1, for the tests of runs/telemetry.py: it
accepts `POST /v1/traces` (binary protobuf, gzip or not), decodes each
`ExportTraceServiceRequest` with `opentelemetry-proto` and keeps its spans."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2


@dataclass
class Received:
    """One span as it arrived: its ids in hex, times in ns, attributes as Python values."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    start: int
    end: int
    attributes: dict
    resource: dict
    status_code: int
    links: list[str]  # the trace ids they point to


def plain(value):
    """An OTLP AnyValue as the Python value it carries."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [plain(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def attributes_of(pairs) -> dict:
    return {pair.key: plain(pair.value) for pair in pairs}


class Receiver:
    def __init__(self):
        self.spans: list[Received] = []
        self.headers: list[dict] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> Receiver:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def of_trace(self, trace_id: str) -> list[Received]:
        with self.lock:
            return [span for span in self.spans if span.trace_id == trace_id]

    def keep(self, body: bytes, headers: dict) -> None:
        request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
        found = []
        for resource_spans in request.resource_spans:
            resource = attributes_of(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(
                        Received(
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            name=span.name,
                            start=span.start_time_unix_nano,
                            end=span.end_time_unix_nano,
                            attributes=attributes_of(span.attributes),
                            resource=resource,
                            status_code=span.status.code,
                            links=[link.trace_id.hex() for link in span.links],
                        )
                    )
        with self.lock:
            self.spans += found
            self.headers.append(headers)

    def _handler(self):
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path != "/v1/traces":
                    self.send_error(404)
                    return
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                receiver.keep(body, {k.lower(): v for k, v in self.headers.items()})
                answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        return Handler
