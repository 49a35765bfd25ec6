"""OpenTelemetry tracing with context carried through SQS attributes and execution input.

No exporter is installed unless OTEL_TRACES_EXPORTER=console is set (the sandbox may add its own
span processor). Span attributes carry identifiers (job id, file key, counts), never content.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagate import extract, inject
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

TRACE_ATTRIBUTE = "traceparent"  # SQS message attribute and execution-input field carrying context


def _provider() -> TracerProvider:
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    provider = TracerProvider(
        resource=Resource.create({"service.name": os.environ.get("POWERTOOLS_SERVICE_NAME", "pipeops")})
    )
    if os.environ.get("OTEL_TRACES_EXPORTER", "").lower() == "console":
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider


tracer = _provider().get_tracer("pipeops.pipeline")


def carrier_from_current() -> dict[str, str]:
    """W3C trace context of the current span, as a plain dict (to put in input or attributes)."""
    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier


def sqs_attributes_from_current() -> dict[str, dict[str, str]]:
    """SQS MessageAttributes carrying the current trace context."""
    return {
        key: {"DataType": "String", "StringValue": value} for key, value in carrier_from_current().items()
    }


def carrier_from_sqs_record(record: Mapping[str, Any]) -> dict[str, str]:
    """Trace context from a Lambda SQS event record's messageAttributes."""
    attributes = record.get("messageAttributes") or {}
    carrier = {}
    for key, attribute in attributes.items():
        value = attribute.get("stringValue") or attribute.get("StringValue")
        if isinstance(value, str):
            carrier[key] = value
    return carrier


@contextmanager
def span(name: str, carrier: Mapping[str, str] | None = None, **attributes: Any) -> Iterator[trace.Span]:
    """A span, child of the context in `carrier` when given (remote parent), else of the current one."""
    token = otel_context.attach(extract(dict(carrier))) if carrier else None
    try:
        clean = {k: v for k, v in attributes.items() if v is not None}
        with tracer.start_as_current_span(name, attributes=clean) as current:
            yield current
    finally:
        if token is not None:
            otel_context.detach(token)
