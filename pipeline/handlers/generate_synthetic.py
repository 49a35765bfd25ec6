"""Step Functions task: one consistent synthetic mapping for the job (secret: never logged)."""

from __future__ import annotations

from typing import Any

from pipeline.handlers import _wiring
from pipeline.tasks import generate_synthetic, transient_aws_errors
from pipeline.telemetry import emit, logger
from pipeline.telemetry.catalog import Metric
from pipeline.telemetry.handler import instrumented
from pipeline.telemetry.logging import correlate
from pipeline.telemetry.tracing import span


@instrumented("generate_synthetic")
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    correlate(job_id=event["job_id"], execution_name=event["execution_name"])
    with span("synthetic.generate", (event.get("trace") or {}), job_id=event["job_id"]), transient_aws_errors():
        result = generate_synthetic(event, _wiring.artifacts())
    emit(Metric.SYNTHETIC_VALUES_GENERATED, result["replacements"])
    logger.info("synthetic mapping written", extra={"replacements": result["replacements"]})
    return result
