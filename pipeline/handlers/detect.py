"""Step Functions task: detect PII in one file. In blackout mode it writes the redacted copy in the
same pass; otherwise the findings (offsets, never values) go to S3 for the synthetic mapping and
the redaction. The workflow gets a summary of a few bytes (`hand_back`)."""

from __future__ import annotations

from typing import Any

from pipeline.handlers import _wiring
from pipeline.status import FileOutcome
from pipeline.tasks import detect_file, hand_back, transient_aws_errors
from pipeline.telemetry import emit, logger
from pipeline.telemetry.catalog import Metric
from pipeline.telemetry.handler import instrumented
from pipeline.telemetry.logging import correlate
from pipeline.telemetry.tracing import span


@instrumented("detect")
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    correlate(job_id=event["job_id"], execution_name=event["execution_name"], file_key=event["file_key"])
    with span("detect.file", (event.get("trace") or {}), job_id=event["job_id"], file_key=event["file_key"]), transient_aws_errors():
        artifacts = _wiring.artifacts()
        result = detect_file(event, artifacts, _wiring.detector())
        handed_back = hand_back(event, artifacts, result)
    emit(Metric.FILES_DETECTED)
    if result["outcome"] == FileOutcome.EMPTY:
        emit(Metric.EMPTY_FILES)
    elif result["outcome"] == FileOutcome.FAILED:
        emit(Metric.FILE_FAILURES)
    emit(Metric.PII_ENTITIES_DETECTED, sum(result["entity_counts"].values()))
    if result.get("redacted"):
        emit(Metric.FILES_REDACTED)
    logger.info(
        "file scanned",
        extra={"outcome": result["outcome"], "entity_counts": result["entity_counts"], "redacted": bool(result.get("redacted"))},
    )
    return handed_back
