"""Ingest (realtime): S3 object created → the job's pending run → the main queue."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pipeline.aws import client
from pipeline.handlers import _wiring
from pipeline.ingest import IngestOutcome, ingest_object, pick_key
from pipeline.jobs import is_folder_marker, utc_now
from pipeline.s3events import ObjectCreated, object_created
from pipeline.telemetry import emit, logger
from pipeline.telemetry.catalog import Metric
from pipeline.telemetry.handler import instrumented
from pipeline.telemetry.logging import correlate

# Which metrics each outcome counts: a file is ingested once per version, however often its
# event arrives; every other delivery is a duplicate.
_METRICS = {
    IngestOutcome.NEW_RUN: (Metric.FILES_INGESTED, Metric.JOBS_QUEUED),
    IngestOutcome.JOINED_PENDING_RUN: (Metric.FILES_INGESTED,),
    IngestOutcome.REANNOUNCED: (Metric.DUPLICATE_DELIVERIES,),
    IngestOutcome.DUPLICATE: (Metric.DUPLICATE_DELIVERIES,),
    IngestOutcome.STALE: (Metric.DUPLICATE_DELIVERIES,),
}
_INGESTED = frozenset({IngestOutcome.NEW_RUN, IngestOutcome.JOINED_PENDING_RUN})


def _etag_of(bucket: str) -> Callable[[str], str | None]:
    """A key's ETag from one listing (None: no such key). ListObjectsV2, not HeadObject: it needs
    s3:ListBucket only, no read of the file's contents; a key is the first key listed under
    itself as a prefix, since every other key there is longer."""

    def etag_of(key: str) -> str | None:
        listed = client("s3").list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1).get("Contents", [])
        return str(listed[0]["ETag"]) if listed and listed[0]["Key"] == key else None

    return etag_of


def _located(created: ObjectCreated) -> ObjectCreated:
    """`created` under the key it has in its bucket (a lookup only when its forms differ)."""
    if len(created.key_forms()) == 1:
        return created
    key = pick_key(created, _etag_of(created.bucket))
    if key != created.key:
        logger.info("object found under its key as delivered, not decoded", extra={"key_form": "delivered"})
    return replace(created, key=key)


@instrumented("ingest")
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """One "Object Created" event from EventBridge (the only source template.yaml wires). Raises
    on failure: the asynchronous invocation is retried, then kept in the ingest DLQ."""
    delivered = object_created(event)
    if delivered is None or is_folder_marker(delivered.key):  # the console's "Create folder": not a file
        logger.debug("no file to ingest", extra={"file_key": delivered.key if delivered else None})
        return {"outcome": None}
    correlate(file_key=delivered.key)
    created = _located(delivered)
    correlate(file_key=created.key)
    result = ingest_object(
        created, _wiring.tracking_store(), _wiring.claims_store(), _wiring.job_queue().send, _wiring.settings(), utc_now()
    )
    correlate(job_id=result.run.job_id, execution_name=result.run.execution_name)
    for metric in _METRICS[result.outcome]:
        emit(metric)
    logger.info(
        "file ingested" if result.outcome in _INGESTED else "delivery already accounted for",
        extra={"outcome": result.outcome.value, "started_at": result.run.started_at, "sequencer": created.version.sequencer},
    )
    return {"outcome": result.outcome.value}
