"""OpenTelemetry tracing with context carried through SQS attributes and execution input (W3C traceparent).

The API alone unless an exporter is configured, and loaded only when needed: with no tracer provider
set, a span has nothing to record, so a handler with no incoming trace context never even imports
OpenTelemetry, and the SDK (~10 ms of every cold start) is never imported. An incoming trace context
(the SQS `traceparent` attribute, the execution input's `trace`) is still carried on to what a
handler sends: the API's no-op span is its remote parent's context. `OTEL_TRACES_EXPORTER`
(comma-separated, the standard variable) installs the SDK with its exporters: `console`, and `otlp`,
the standard OTLP/HTTP exporter (a Lambda requirement, so in every artifact; endpoint and headers
from the standard OTEL_EXPORTER_OTLP_* variables). On AWS the template's `Tracing=otlp` sets both
variables and adds the ADOT collector layer, which receives on localhost:4318 and forwards to X-Ray
(docs/ARCHITECTURE.md, "Tracing"). A provider someone else set (a test, the sandbox) is used as it
is. Span attributes carry identifiers (job id, file key, counts), never content.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING, Any

from pipeline.config import ConfigurationError
from pipeline.stack import SERVICE_NAME, SERVICE_NAME_ENV

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

ENV_TRACES_EXPORTER = "OTEL_TRACES_EXPORTER"
EXPORTERS = ("console", "otlp")


def exporters_from(env: Mapping[str, str]) -> tuple[str, ...]:
    """The exporters `OTEL_TRACES_EXPORTER` names, in order ('' or `none`: none). Pure."""
    named = [name.strip().lower() for name in env.get(ENV_TRACES_EXPORTER, "").split(",")]
    chosen = tuple(dict.fromkeys(name for name in named if name and name != "none"))
    unknown = [name for name in chosen if name not in EXPORTERS]
    if unknown:
        raise ConfigurationError(
            f"{ENV_TRACES_EXPORTER} names {', '.join(unknown)}; supported: {', '.join(EXPORTERS)} or none"
        )
    return chosen


def install_sdk(exporters: tuple[str, ...], service: str) -> TracerProvider:
    """Set the global tracer provider to the SDK's, exporting to `exporters` (imported only here)."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    for name in exporters:
        if name == "console":
            provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
        elif name == "otlp":
            try:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            except ImportError as exc:
                raise ConfigurationError(
                    f"{ENV_TRACES_EXPORTER}=otlp needs opentelemetry-exporter-otlp-proto-http (requirements.txt)"
                ) from exc
            # Batched, and flushed at the end of every invocation (`flush`): Lambda freezes the
            # container between invocations, so nothing may wait for a background export.
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider


_flush: Callable[[], Any] | None = None
_configure_lock = threading.Lock()


def configure(environ: Mapping[str, str] = os.environ) -> None:
    """Install the SDK when `environ` names exporters and no provider is set yet: at import, and
    at each function's cold start (the sandbox imports this module before any function's
    environment is applied). Without exporters nothing is imported."""
    global _flush
    exporters = exporters_from(environ)
    if not exporters or _flush is not None:
        return  # the API alone, loaded when a trace context comes in; or installed already
    from opentelemetry import trace

    with _configure_lock:
        if _flush is not None or not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            return  # installed meanwhile, or a provider someone else set and flushes
        _flush = install_sdk(exporters, environ.get(SERVICE_NAME_ENV) or SERVICE_NAME).force_flush


configure()


@cache
def get_tracer() -> Tracer:
    """Our tracer (loads the API)."""
    from opentelemetry import trace

    # A proxy: it delegates to whatever provider is set, now or later (a test's in-memory exporter).
    return trace.get_tracer("pipeops.pipeline")


def __getattr__(name: str) -> Any:
    """`tracer`, built on first use (importing this module loads no OpenTelemetry)."""
    if name == "tracer":
        return get_tracer()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def recording() -> bool:
    """Whether spans go anywhere: a real tracer provider is set (ours or someone else's). A provider
    can only be set by code that imported the API, so without it loaded nothing records."""
    if "opentelemetry.trace" not in sys.modules:
        return False
    from opentelemetry import trace  # waits for an import another thread has under way

    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def flush() -> None:
    """Export the spans our provider holds (end of an invocation); nothing without an exporter."""
    if _flush is not None:
        _flush()


def carrier_from_current() -> dict[str, str]:
    """W3C trace context of the current span, as a plain dict (to put in input or attributes)."""
    carrier: dict[str, str] = {}
    if "opentelemetry.context" in sys.modules:  # else no span nor context was ever made current
        from opentelemetry.propagate import inject

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
def span(name: str, carrier: Mapping[str, str] | None = None, **attributes: Any) -> Iterator[Span | None]:
    """A span, child of the context in `carrier` when given (remote parent), else of the current one.

    With no provider set the span would be the API's no-op one, which records nothing and whose
    context is its parent's: none is made (None without a carrier, the current span with one), and
    only the parent's context, attached from `carrier`, is made current to be propagated.
    """
    if not carrier and not recording():
        yield None
        return
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.propagate import extract

    token = otel_context.attach(extract(dict(carrier))) if carrier else None
    try:
        if not recording():
            yield trace.get_current_span()
            return
        clean = {k: v for k, v in attributes.items() if v is not None}
        with get_tracer().start_as_current_span(name, attributes=clean) as current:
            yield current
    finally:
        if token is not None:
            otel_context.detach(token)
