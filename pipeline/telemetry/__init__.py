"""Logging, metrics and tracing shared by every handler.

Handlers import `logger` and `emit` from here (spans: `pipeline.telemetry.tracing.span`); metrics are
emitted only through the catalog (`pipeline.telemetry.catalog`), so dashboards, alarms and docs can be
generated from it. `tracer` is built on first use: importing telemetry loads no OpenTelemetry.
"""

from typing import Any

from pipeline.telemetry.logging import logger
from pipeline.telemetry.metrics import emit

__all__ = ["emit", "logger", "tracer"]


def __getattr__(name: str) -> Any:
    if name == "tracer":
        from pipeline.telemetry import tracing

        return tracing.get_tracer()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
