"""EMF metrics through powertools, emitted only from the catalog, one EMF document per invocation.

An invocation collects its points in a plain list of its own (`collect`) and, when it ends, they are
written as one EMF document through its function's powertools metric set. In AWS a container runs
one invocation at a time, but the sandbox runs many functions on threads of one interpreter: points
are never shared between invocations, so no function's metrics are published under another's name.

Cost (bench/telemetry_cost.py): a function's metric set (namespace, service, the stage and function
dimensions, whether metrics are disabled) is built once, at its first flush, and reused under a lock;
a flush adds the points, serializes, and clears the points only: the dimensions are not validated
again, nor the environment read again, at every invocation as powertools' `flush_metrics` would.
"""

from __future__ import annotations

import json
import numbers
import os
import sys
import threading
from collections.abc import Sequence
from contextvars import ContextVar, Token

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit
from aws_lambda_powertools.metrics.exceptions import MetricValueError
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

from pipeline.config import Settings, env_name
from pipeline.stack import SERVICE_NAME, SERVICE_NAME_ENV
from pipeline.telemetry.catalog import CATALOG, NAMESPACE, Metric

Point = tuple[str, MetricUnit, float]  # metric name, unit, value
# Name and powertools unit of every catalog metric, resolved once (not per emit).
_DEFINITIONS: dict[Metric, tuple[str, MetricUnit]] = {
    metric: (spec.name.value, MetricUnit(spec.unit.value)) for metric, spec in CATALOG.items()
}
_current: ContextVar[list[Point] | None] = ContextVar("pipeops_invocation_metrics", default=None)
_metric_sets: dict[str, tuple[EphemeralMetrics | None, threading.Lock]] = {}
_sets_lock = threading.Lock()


def _metric_set(function: str) -> tuple[EphemeralMetrics | None, threading.Lock]:
    """The function's metric set (None when metrics are disabled), built at its first use."""
    found = _metric_sets.get(function)
    if found is None:
        with _sets_lock:
            found = _metric_sets.get(function)
            if found is None:
                metric_set = None
                if not is_metrics_disabled():
                    metric_set = EphemeralMetrics(
                        namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or NAMESPACE,
                        service=os.environ.get(SERVICE_NAME_ENV) or SERVICE_NAME,
                    )
                    metric_set.set_default_dimensions(stage=os.environ.get(env_name(Settings, "stage")) or Settings.stage, function=function)
                found = _metric_sets[function] = (metric_set, threading.Lock())
    return found


def reset() -> None:
    """Forget the metric sets (tests change the environment between cases)."""
    with _sets_lock:
        _metric_sets.clear()


def flush(function: str, points: Sequence[Point]) -> None:
    """Print `points` as one EMF document with `function`'s dimensions (nothing when empty)."""
    if not points:
        return
    metric_set, lock = _metric_set(function)
    if metric_set is None:
        return
    with lock:
        try:
            for name, unit, value in points:
                metric_set.add_metric(name=name, unit=unit, value=value)  # prints by itself at 100
            document = metric_set.serialize_metric_set() if metric_set.metric_set else None
        finally:
            metric_set.metric_set.clear()  # the points only: the dimensions stay, validated once
    if document is not None:
        sys.stdout.write(json.dumps(document, separators=(",", ":")) + "\n")


def collect() -> tuple[list[Point], Token[list[Point] | None]]:
    """Start collecting this invocation's points (in this context); `stop(token)` ends it."""
    points: list[Point] = []
    return points, _current.set(points)


def stop(token: Token[list[Point] | None]) -> None:
    _current.reset(token)


def emit(metric: Metric, value: float = 1) -> None:
    """Add one data point of a catalog metric to the current invocation's EMF document.

    A value that is not a number is refused here, where it is emitted (MetricValueError, as
    powertools). Outside an invocation (scripts, tests) the point is flushed at once as its own
    document.
    """
    name, unit = _DEFINITIONS[metric]
    if type(value) is not float:
        if type(value) is not int and not isinstance(value, numbers.Number):
            raise MetricValueError(f"{value} is not a valid number")
        value = float(value)
    points = _current.get()
    if points is not None:
        points.append((name, unit, value))
        return
    flush(os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "local"), [(name, unit, value)])
