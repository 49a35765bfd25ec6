"""EMF metrics through powertools, emitted only from the catalog."""

from __future__ import annotations

import os

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

from pipeline.telemetry.catalog import CATALOG, NAMESPACE, Metric

metrics = Metrics(
    namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", NAMESPACE),
    service=os.environ.get("POWERTOOLS_SERVICE_NAME", "pipeops"),
)
metrics.set_default_dimensions(
    stage=os.environ.get("STAGE", "dev"),
    function=os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "local"),
)


def emit(metric: Metric, value: float = 1) -> None:
    """Add one data point of a catalog metric to the current EMF document."""
    definition = CATALOG[metric]
    metrics.add_metric(name=definition.name, unit=MetricUnit(definition.unit.value), value=value)
