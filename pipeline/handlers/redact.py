"""Step Functions task (synthetic mode): write the redacted copy of one file to the output bucket at
the same key; the workflow gets a summary of a few bytes (`hand_back`)."""

from __future__ import annotations

from typing import Any

from pipeline.handlers import _wiring
from pipeline.status import FileOutcome
from pipeline.tasks import hand_back, redact_file, transient_aws_errors
from pipeline.telemetry import emit, logger
from pipeline.telemetry.catalog import Metric
from pipeline.telemetry.handler import instrumented
from pipeline.telemetry.logging import correlate
from pipeline.telemetry.tracing import span


@instrumented("redact")
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    file_key = event["file_key"]
    correlate(job_id=event["job_id"], execution_name=event["execution_name"], file_key=file_key)
    with span("redact.file", (event.get("trace") or {}), job_id=event["job_id"], file_key=file_key), transient_aws_errors():
        artifacts = _wiring.artifacts()
        result = redact_file(event, artifacts)
        handed_back = hand_back(event, artifacts, result)
    if result["outcome"] == FileOutcome.REDACTED:
        emit(Metric.FILES_REDACTED)
    logger.info("file redacted", extra={"outcome": result["outcome"], "replacements": result["replacements"]})
    return handed_back
