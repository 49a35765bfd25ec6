"""Ingest (realtime): S3 object created → the job's pending run → the main queue."""

from __future__ import annotations

from typing import Any

from pipeline.handlers import _wiring
from pipeline.ingest import IngestOutcome, ingest_object
from pipeline.jobs import utc_now
from pipeline.s3events import objects_in
from pipeline.telemetry import emit, logger
from pipeline.telemetry.catalog import Metric
from pipeline.telemetry.handler import instrumented
from pipeline.telemetry.logging import correlate


@instrumented("ingest")
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Raises on failure so the event source retries; SQS batches report failures per message."""
    failures: list[dict[str, str]] = []
    for message_id, created in objects_in(event):
        correlate(file_key=created.key, message_id=message_id)
        try:
            result = ingest_object(
                created, _wiring.tracking_store(), _wiring.job_queue().send, _wiring.settings(), utc_now()
            )
        except Exception:
            if message_id is None:
                raise
            logger.exception("ingest failed; the message will be retried")
            failures.append({"itemIdentifier": message_id})
            continue
        correlate(job_id=result.run.job_id, execution_name=result.run.execution_name)
        emit(Metric.FILES_INGESTED)
        if result.outcome is not IngestOutcome.JOINED_PENDING_RUN:
            emit(Metric.JOBS_QUEUED)
        logger.info("file ingested", extra={"outcome": result.outcome.value, "started_at": result.run.started_at})
    return {"batchItemFailures": failures}
