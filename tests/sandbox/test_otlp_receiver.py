"""sandbox.otlp_receiver: what the standard OTLP/HTTP exporter sends arrives decoded."""

from __future__ import annotations

import gzip
import urllib.error
import urllib.request

import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from sandbox.otlp_receiver import OtlpReceiver


@pytest.fixture
def receiver():
    server = OtlpReceiver()
    yield server
    server.stop()


@pytest.mark.parametrize("compression", [Compression.NoCompression, Compression.Gzip])
def test_spans_from_the_standard_exporter_are_decoded(receiver: OtlpReceiver, compression: Compression) -> None:
    exporter = OTLPSpanExporter(endpoint=f"{receiver.endpoint}/v1/traces", compression=compression)
    provider = TracerProvider(resource=Resource.create({"service.name": "svc"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with (
        tracer.start_as_current_span("outer", attributes={"job_id": "j1", "files": 3}) as outer,
        tracer.start_as_current_span("inner"),
    ):
        pass
    provider.shutdown()
    inner, received_outer = receiver.spans
    assert (inner.name, received_outer.name) == ("inner", "outer")
    assert received_outer.attributes == {"job_id": "j1", "files": 3}
    assert received_outer.service == "svc" and received_outer.parent_span_id == ""
    assert inner.parent_span_id == received_outer.span_id == f"{outer.get_span_context().span_id:016x}"
    assert inner.trace_id == received_outer.trace_id == f"{outer.get_span_context().trace_id:032x}"


def post(url: str, body: bytes, content_type: str) -> int:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": content_type}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_what_a_collector_would_refuse_is_refused(receiver: OtlpReceiver) -> None:
    assert post(f"{receiver.endpoint}/v1/metrics", b"", "application/x-protobuf") == 404
    assert post(f"{receiver.endpoint}/v1/traces", b"{}", "application/json") == 415
    assert post(f"{receiver.endpoint}/v1/traces", gzip.compress(b"x") + b"\xff", "application/x-protobuf") == 400
    assert receiver.spans == [] and receiver.rejected == 1
