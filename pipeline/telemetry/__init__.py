"""Logging, metrics and tracing shared by every handler.

Handlers import `logger`, `metrics`, `tracer` from here; metrics are emitted only through the
catalog (`pipeline.telemetry.catalog`), so dashboards, alarms and docs can be generated from it.
"""

from pipeline.telemetry.logging import logger
from pipeline.telemetry.metrics import emit
from pipeline.telemetry.tracing import tracer

__all__ = ["emit", "logger", "tracer"]
