"""The sandbox's stand-in for the ADOT collector layer: an OTLP/HTTP trace receiver on loopback.

On AWS, `Tracing=otlp` adds the ADOT collector layer, which listens on localhost:4318 inside each
execution environment and forwards what the functions' OTLP/HTTP exporter sends. The sandbox runs
every function in one process, so one receiver serves them all: `sandbox.runtime` points a
function whose OTEL_TRACES_EXPORTER names `otlp` at it (OTEL_EXPORTER_OTLP_ENDPOINT), and the
spans it decodes (`ExportTraceServiceRequest`, protobuf, gzip or not) are kept as plain data for
tests and tools to read. Only POST /v1/traces is served; anything else is answered 404 or 415, as a
collector would refuse it.
"""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sandbox.background import BackgroundThread

TRACES_PATH = "/v1/traces"
PROTOBUF = "application/x-protobuf"


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str  # hex
    span_id: str  # hex
    parent_span_id: str  # hex, "" for a root span
    service: str
    attributes: dict[str, Any] = field(default_factory=dict)


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind is None:
        return None
    value = getattr(any_value, kind)
    if kind == "array_value":
        return [_value(v) for v in value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.values}
    return value


def decode_spans(body: bytes) -> list[ReceivedSpan]:
    """The spans of one ExportTraceServiceRequest (raises on a body that is not one)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans: list[ReceivedSpan] = []
    for resource_spans in request.resource_spans:
        resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
        service = str(resource.get("service.name", ""))
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        service=service,
                        attributes={kv.key: _value(kv.value) for kv in span.attributes},
                    )
                )
    return spans


_shared: OtlpReceiver | None = None
_shared_lock = threading.Lock()


def shared() -> OtlpReceiver:
    """The process's receiver, started on first use and kept for the process's life: the tracer
    provider a function installs is global and outlives any one sandbox, so its endpoint must too
    (a stopped one would make every later flush wait out the exporter's retries)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = OtlpReceiver()
        return _shared


class OtlpReceiver(BackgroundThread):
    """A loopback OTLP/HTTP receiver on a free port; `endpoint` is what OTEL_EXPORTER_OTLP_ENDPOINT
    takes (the exporter appends /v1/traces)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        super().__init__("otlp-receiver")
        self._lock = threading.Lock()
        self._spans: list[ReceivedSpan] = []
        self.rejected = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path != TRACES_PATH:
                    self._answer(404, b"")
                    return
                if self.headers.get("Content-Type", "").split(";")[0].strip() != PROTOBUF:
                    self._answer(415, b"")
                    return
                try:
                    if self.headers.get("Content-Encoding") == "gzip":
                        body = gzip.decompress(body)
                    spans = decode_spans(body)
                except Exception:
                    with receiver._lock:
                        receiver.rejected += 1
                    self._answer(400, b"")
                    return
                with receiver._lock:
                    receiver._spans.extend(spans)
                self._answer(200, b"")  # an empty ExportTraceServiceResponse: full success

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", PROTOBUF)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return  # quiet: the sandbox's window is for the pipeline

        self._server = ThreadingHTTPServer((host, 0), Handler)
        self._server.daemon_threads = True
        super().start()

    @property
    def endpoint(self) -> str:
        host, port = self._server.socket.getsockname()[:2]  # what server_address holds, typed as str
        return f"http://{host}:{port}"

    @property
    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    def _run(self) -> None:
        self._server.serve_forever()

    def _interrupt(self) -> None:
        if self._thread is not None:
            self._server.shutdown()  # returns once serve_forever has

    def stop(self, timeout: float = 5.0) -> bool:
        ended = super().stop(timeout)
        self._server.server_close()
        return ended
