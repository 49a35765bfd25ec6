"""Tracing: the API alone without an exporter, the SDK with one, W3C context carried either way.

What depends on the process's one global tracer provider runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bench.imports import PROJECT_ROOT, clean_env
from pipeline.config import ConfigurationError
from pipeline.telemetry import tracing

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

# An instrumented handler invoked once (argv[1]: the remote parent); prints what the test needs to know as JSON.
_INVOKE = """
import json, sys
from pipeline.telemetry import tracing
from pipeline.telemetry.handler import instrumented

@instrumented("probe")
def handler(event, context):
    with tracing.span("probe.inner", {"traceparent": event["parent"]}):
        sqs = tracing.sqs_attributes_from_current()
        record = {"messageAttributes": {k: {"stringValue": v["StringValue"]} for k, v in sqs.items()}}
        return {"inner": tracing.carrier_from_current(), "from_sqs": tracing.carrier_from_sqs_record(record)}

class Context:
    function_name, aws_request_id, memory_limit_in_mb = "ProbeFunction", "r-1", 128

@instrumented("plain")
def plain(event, context):
    with tracing.span("plain.inner", {}):
        return tracing.carrier_from_current()

untraced = plain({}, Context())
api_without_context = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
result = handler({"parent": sys.argv[1]}, Context())
result["untraced"], result["api_without_context"] = untraced, api_without_context
result["outside"] = tracing.carrier_from_current()
result["recording"] = tracing.recording()
result["modules"] = sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk") or m.startswith("opentelemetry.exporter"))
print(json.dumps(result))
"""


def invoke_in_fresh_interpreter(extra_env: Mapping[str, str] = {}) -> tuple[dict[str, Any], str]:
    completed = subprocess.run(
        [sys.executable, "-c", _INVOKE, PARENT],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env={k: v for k, v in clean_env().items() if "PROXY" not in k.upper()} | dict(extra_env),
        timeout=60,
        check=True,
    )
    return json.loads(completed.stdout.strip().splitlines()[-1]), completed.stdout


# ------------------------------------------------------------------------------ OTEL_TRACES_EXPORTER


@pytest.mark.parametrize(
    ("value", "expected"),
    [("", ()), ("none", ()), ("console", ("console",)), (" OTLP , console,otlp", ("otlp", "console"))],
)
def test_the_exporters_are_read_from_the_standard_variable(value: str, expected: tuple[str, ...]) -> None:
    assert tracing.exporters_from({"OTEL_TRACES_EXPORTER": value}) == expected


def test_an_unknown_exporter_is_refused_by_name() -> None:
    with pytest.raises(ConfigurationError, match="jaeger"):
        tracing.exporters_from({"OTEL_TRACES_EXPORTER": "otlp,jaeger"})


# ------------------------------------------------------------------------------ no exporter: the API


def test_without_an_exporter_no_sdk_loads_and_the_incoming_context_is_carried_on() -> None:
    result, _ = invoke_in_fresh_interpreter()
    assert result["modules"] == [] and result["recording"] is False
    assert result["untraced"] == {} and result["api_without_context"] == []  # nothing came in: no API either
    assert result["inner"]["traceparent"] == PARENT  # the no-op span is its remote parent's context
    assert result["from_sqs"]["traceparent"] == PARENT  # through SQS message attributes
    assert "traceparent" not in result["outside"]


# ------------------------------------------------------------------------------ exporters: the SDK


def test_console_exports_every_span_to_stdout() -> None:
    result, stdout = invoke_in_fresh_interpreter({"OTEL_TRACES_EXPORTER": "console"})
    assert result["recording"] is True
    assert '"name": "pipeops.probe"' in stdout and '"name": "probe.inner"' in stdout
    child = result["inner"]["traceparent"].split("-")
    assert child[1] == PARENT.split("-")[1] and child[2] != PARENT.split("-")[2]  # same trace, a new span


class _Collector(BaseHTTPRequestHandler):
    requests: list[tuple[str, str, bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.requests.append((self.path, self.headers.get("Content-Type", ""), body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    """An OTLP/HTTP endpoint on loopback that records what it is sent."""
    received: list[tuple[str, str, bytes]] = []
    handler = type("Collector", (_Collector,), {"requests": received})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/v1/traces", received
    server.shutdown()
    server.server_close()


def test_otlp_exports_the_invocation_spans_through_the_standard_exporter(collector) -> None:
    endpoint, received = collector
    result, _ = invoke_in_fresh_interpreter(
        {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint, "NO_PROXY": "127.0.0.1"}
    )
    assert "opentelemetry.exporter.otlp.proto.http.trace_exporter" in result["modules"]
    assert len(received) == 2  # flushed once at the end of each of the two invocations
    assert all(path == "/v1/traces" and kind == "application/x-protobuf" for path, kind, _ in received)
    (_, _, plain), (_, _, probe) = received
    assert b"pipeops.plain" in plain and b"plain.inner" in plain and b"pipeops.probe" not in plain
    assert b"pipeops.probe" in probe and b"probe.inner" in probe and b"ProbeFunction" in probe


# ------------------------------------------------------------------------------ a provider set by others


def test_a_provider_set_by_someone_else_records_our_spans_with_their_remote_parent() -> None:
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        trace.set_tracer_provider(TracerProvider())
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    try:
        with tracing.span("unit.span", {"traceparent": PARENT}, job_id="job-1", absent=None):
            inner = tracing.carrier_from_current()
    finally:
        exporter.shutdown()  # quiet from now on: the provider keeps its processors
    [span] = [s for s in exporter.get_finished_spans() if s.name == "unit.span"]
    assert format(span.context.trace_id, "032x") == PARENT.split("-")[1]
    assert span.parent is not None and format(span.parent.span_id, "016x") == PARENT.split("-")[2]
    assert dict(span.attributes or {}) == {"job_id": "job-1"}
    assert inner["traceparent"].split("-")[2] == format(span.context.span_id, "016x")
