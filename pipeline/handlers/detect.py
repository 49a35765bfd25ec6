"""Step Functions task: detect PII in one file; findings (offsets, never values) and the file's
result go to S3, the workflow gets a summary of a few bytes."""

from __future__ import annotations

from typing import Any

from pipeline.handlers import _wiring
from pipeline.tasks import detect_file, summary, transient_aws_errors
from pipeline.telemetry import emit, logger
from pipeline.telemetry.catalog import Metric
from pipeline.telemetry.handler import instrumented
from pipeline.telemetry.logging import correlate
from pipeline.telemetry.tracing import span


@instrumented("detect")
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    correlate(job_id=event["job_id"], execution_name=event["execution_name"], file_key=event["file_key"])
    with span("detect.file", (event.get("trace") or {}), job_id=event["job_id"], file_key=event["file_key"]), transient_aws_errors():
        result = detect_file(event, _wiring.artifacts(), _wiring.detector())
    emit(Metric.FILES_DETECTED)
    if result["outcome"] == "empty":
        emit(Metric.EMPTY_FILES)
    elif result["outcome"] == "failed":
        emit(Metric.FILE_FAILURES)
    emit(Metric.PII_ENTITIES_DETECTED, sum(result["entity_counts"].values()))
    logger.info("file scanned", extra={"outcome": result["outcome"], "entity_counts": result["entity_counts"]})
    return summary(result)
