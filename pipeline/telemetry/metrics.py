"""EMF metrics through powertools, emitted only from the catalog, one metric set per invocation.

Each invocation gets its own EMF document (`invocation_metrics`), flushed when it ends: in AWS a
container runs one invocation at a time, but the sandbox runs many functions on threads of one
interpreter, and a shared metric set would publish one function's metrics under another's name.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from pipeline.telemetry.catalog import CATALOG, NAMESPACE, Metric

_current: ContextVar[EphemeralMetrics | None] = ContextVar("pipeops_invocation_metrics", default=None)


def _new_metric_set(function: str) -> EphemeralMetrics:
    metric_set = EphemeralMetrics(
        namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", NAMESPACE),
        service=os.environ.get("POWERTOOLS_SERVICE_NAME", "pipeops"),
    )
    metric_set.add_dimension(name="stage", value=os.environ.get("STAGE", "dev"))
    metric_set.add_dimension(name="function", value=function)
    return metric_set


@contextmanager
def invocation_metrics(function: str) -> Iterator[EphemeralMetrics]:
    """Collect this invocation's metrics and print them as one EMF document at its end."""
    metric_set = _new_metric_set(function)
    token = _current.set(metric_set)
    try:
        yield metric_set
    finally:
        _current.reset(token)
        if metric_set.metric_set:
            metric_set.flush_metrics()


def emit(metric: Metric, value: float = 1) -> None:
    """Add one data point of a catalog metric to the current invocation's EMF document.

    Outside an invocation (scripts, tests) the point is flushed at once as its own document.
    """
    definition = CATALOG[metric]
    unit = MetricUnit(definition.unit.value)
    metric_set = _current.get()
    if metric_set is not None:
        metric_set.add_metric(name=definition.name, unit=unit, value=value)
        return
    with invocation_metrics(os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "local")) as standalone:
        standalone.add_metric(name=definition.name, unit=unit, value=value)
