"""The tracking table: one item per run of a job, and one head item per job.

Run items: key (job_id, started_at). Status moves forward only: every status write carries a
ConditionExpression derived from `pipeline.status`, so a late or duplicated write is refused by
DynamoDB itself. `active_status` mirrors the status while the run is active and is removed when
it ends: it keys the sparse `active-jobs` index, so "which jobs are active" is a query, not a scan.

Head items: key (job_id, "#head"). `latest_started_at` lets the batch trigger read the latest run
of many jobs with two BatchGetItem calls instead of one query per job; `pending_started_at` names
the QUEUED run that still accepts files arriving in the job's folder (DESIGN.md failure mode 10).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from pipeline.aws import error_code
from pipeline.jobs import RunRef, format_timestamp
from pipeline.status import ACTIVE_STATUSES, JobStatus, allowed_predecessors

HEAD_SORT_KEY = "#head"
ACTIVE_INDEX = "active-jobs"
STATUS_INDEX = "by-status"
RETENTION = timedelta(days=90)
FAILED_FILE_KINDS = ("detect", "redact", "unsupported", "empty")
_BATCH_GET_LIMIT = 100

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def _plain(value: Any) -> Any:
    """DynamoDB-deserialised value → JSON-friendly Python (Decimal → int/float, set → sorted list)."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, set):
        return sorted(_plain(v) for v in value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def to_attribute(value: Any) -> dict[str, Any]:
    """A Python value as a DynamoDB AttributeValue (floats become Decimals)."""
    if isinstance(value, float):
        value = Decimal(str(value))
    elif isinstance(value, dict):
        return {"M": {k: to_attribute(v) for k, v in value.items()}}
    elif isinstance(value, list):
        return {"L": [to_attribute(v) for v in value]}
    return _serializer.serialize(value)


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _plain(_deserializer.deserialize(v)) for k, v in item.items()}


def empty_failed_files() -> dict[str, list[Any]]:
    return {kind: [] for kind in FAILED_FILE_KINDS}


@dataclass(frozen=True)
class RunRecord:
    """One run of one job, as read from the tracking table."""

    job_id: str
    started_at: str
    status: JobStatus
    updated_at: str
    files: tuple[str, ...] = ()
    bucket: str = ""
    queued_at: str = ""
    execution_arn: str | None = None
    execution_name: str | None = None
    failed_files: Mapping[str, Any] = field(default_factory=empty_failed_files)
    error: str | None = None
    cause: str | None = None
    mapping_s3_key: str | None = None
    redaction_results: Mapping[str, Any] = field(default_factory=dict)

    @property
    def run(self) -> RunRef:
        return RunRef(self.job_id, self.started_at)

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> RunRecord:
        data = from_item(item)
        return cls(
            job_id=data["job_id"],
            started_at=data["started_at"],
            status=JobStatus(data["status"]),
            updated_at=data.get("updated_at", data["started_at"]),
            files=tuple(data.get("files") or ()),
            bucket=data.get("bucket", ""),
            queued_at=data.get("queued_at", ""),
            execution_arn=data.get("execution_arn"),
            execution_name=data.get("execution_name"),
            failed_files={**empty_failed_files(), **(data.get("failed_files") or {})},
            error=data.get("error"),
            cause=data.get("cause"),
            mapping_s3_key=data.get("mapping_s3_key"),
            redaction_results=data.get("redaction_results") or {},
        )


class PendingAdd(StrEnum):
    ADDED = "added"
    ALREADY_PRESENT = "already_present"
    CLOSED = "closed"


def _expiry(now: datetime) -> int:
    return int((now + RETENTION).timestamp())


def _is_condition_failure(exc: BaseException) -> bool:
    return error_code(exc) == "ConditionalCheckFailedException"


class TrackingStore:
    """Reads and conditional writes of job runs. Takes a boto3 DynamoDB client (moto drops in)."""

    def __init__(self, table_name: str, client: Any) -> None:
        self._table = table_name
        self._client = client

    @staticmethod
    def _key(job_id: str, sort_key: str) -> dict[str, Any]:
        return {"job_id": {"S": job_id}, "started_at": {"S": sort_key}}

    # -- runs -------------------------------------------------------------------------------

    def create_run(
        self,
        run: RunRef,
        files: Iterable[str],
        bucket: str,
        now: datetime,
        extra: Mapping[str, Any] | None = None,
        *,
        lead: bool = True,
    ) -> bool:
        """Write a new QUEUED run and (with `lead`) point the job's head at it. False if it exists."""
        stamp = format_timestamp(now)
        item = {
            "job_id": run.job_id,
            "started_at": run.started_at,
            "status": JobStatus.QUEUED.value,
            "active_status": JobStatus.QUEUED.value,
            "queued_at": stamp,
            "updated_at": stamp,
            "bucket": bucket,
            "execution_name": run.execution_name,
            "failed_files": empty_failed_files(),
            "expiration_time": _expiry(now),
            **(extra or {}),
        }
        keys = sorted(set(files))
        attributes = {k: to_attribute(v) for k, v in item.items()}
        if keys:
            attributes["files"] = {"SS": keys}
        try:
            self._client.put_item(
                TableName=self._table,
                Item=attributes,
                ConditionExpression="attribute_not_exists(job_id)",
            )
        except Exception as exc:
            if _is_condition_failure(exc):
                return False
            raise
        if lead:
            self.advance_head(run, now)
        return True

    def discard_unannounced_run(self, run: RunRef) -> None:
        """Delete a QUEUED run that no message and no head points at (ingest's lost claim)."""
        try:
            self._client.delete_item(
                TableName=self._table,
                Key=self._key(run.job_id, run.started_at),
                ConditionExpression="#status = :queued",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={":queued": {"S": JobStatus.QUEUED.value}},
            )
        except Exception as exc:
            if not _is_condition_failure(exc):
                raise

    def advance_head(self, run: RunRef, now: datetime) -> None:
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self._key(run.job_id, HEAD_SORT_KEY),
                UpdateExpression="SET latest_started_at = :s, expiration_time = :exp",
                ConditionExpression="attribute_not_exists(latest_started_at) OR latest_started_at < :s",
                ExpressionAttributeValues={":s": {"S": run.started_at}, ":exp": {"N": str(_expiry(now))}},
            )
        except Exception as exc:
            if not _is_condition_failure(exc):  # a newer run already leads: nothing to do
                raise

    def get_run(self, run: RunRef) -> RunRecord | None:
        response = self._client.get_item(
            TableName=self._table, Key=self._key(run.job_id, run.started_at), ConsistentRead=True
        )
        item = response.get("Item")
        return RunRecord.from_item(item) if item else None

    def runs_of(self, job_id: str, limit: int = 20) -> list[RunRecord]:
        """The job's runs, newest first (the head item sorts before any timestamp and is skipped)."""
        paginator = self._client.get_paginator("query")
        records: list[RunRecord] = []
        pages = paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="job_id = :j AND started_at > :h",
            ExpressionAttributeValues={":j": {"S": job_id}, ":h": {"S": HEAD_SORT_KEY}},
            ScanIndexForward=False,
        )
        for page in pages:
            for item in page.get("Items", []):
                records.append(RunRecord.from_item(item))
                if len(records) >= limit:
                    return records
        return records

    def latest_runs(self, job_ids: Sequence[str]) -> dict[str, RunRecord]:
        """The latest run of each job that has one, in batches (two BatchGetItem rounds)."""
        heads = self._batch_get([self._key(job_id, HEAD_SORT_KEY) for job_id in dict.fromkeys(job_ids)])
        run_keys = [
            self._key(head["job_id"]["S"], head["latest_started_at"]["S"])
            for head in heads
            if "latest_started_at" in head
        ]
        return {
            record.job_id: record for record in (RunRecord.from_item(i) for i in self._batch_get(run_keys))
        }

    def _batch_get(self, keys: list[dict[str, Any]]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for start in range(0, len(keys), _BATCH_GET_LIMIT):
            request = {self._table: {"Keys": keys[start : start + _BATCH_GET_LIMIT], "ConsistentRead": True}}
            for attempt in range(8):
                response = self._client.batch_get_item(RequestItems=request)
                items.extend(response.get("Responses", {}).get(self._table, []))
                request = response.get("UnprocessedKeys") or {}
                if not request:
                    break
                time.sleep(min(2.0, 0.05 * 2**attempt))  # throttled keys: back off, then retry them
            else:
                raise RuntimeError("BatchGetItem left keys unprocessed after 8 attempts")
        return items

    def active_runs(self, status: JobStatus | None = None, updated_before: str | None = None) -> Iterator[RunRecord]:
        """Active runs from the sparse index, optionally only those not updated since a moment."""
        statuses = [status] if status else list(ACTIVE_STATUSES)
        paginator = self._client.get_paginator("query")
        for active in statuses:
            condition = "active_status = :s"
            values: dict[str, Any] = {":s": {"S": active.value}}
            if updated_before:
                condition += " AND updated_at < :before"
                values[":before"] = {"S": updated_before}
            for page in paginator.paginate(
                TableName=self._table,
                IndexName=ACTIVE_INDEX,
                KeyConditionExpression=condition,
                ExpressionAttributeValues=values,
            ):
                for item in page.get("Items", []):
                    yield RunRecord.from_item(item)

    def _status_pages(self, status: JobStatus, **extra: Any) -> Iterator[dict[str, Any]]:
        """Pages of the `by-status` index for one status."""
        return self._client.get_paginator("query").paginate(
            TableName=self._table,
            IndexName=STATUS_INDEX,
            KeyConditionExpression="#status = :s",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={":s": {"S": status.value}},
            **extra,
        )

    def runs_with_status(self, status: JobStatus, limit: int = 50) -> list[RunRecord]:
        """The most recently updated runs in `status`, newest first."""
        records: list[RunRecord] = []
        for page in self._status_pages(status, ScanIndexForward=False):
            for item in page.get("Items", []):
                records.append(RunRecord.from_item(item))
                if len(records) >= limit:
                    return records
        return records

    def count_by_status(self) -> dict[JobStatus, int]:
        """How many runs are in each status (index queries that count, never a table scan)."""
        return {
            status: sum(page.get("Count", 0) for page in self._status_pages(status, Select="COUNT"))
            for status in JobStatus
        }

    # -- status -----------------------------------------------------------------------------

    def transition(
        self,
        run: RunRef,
        target: JobStatus,
        now: datetime,
        *,
        fields: Mapping[str, Any] | None = None,
        expected_status: JobStatus | None = None,
        expected_updated_at: str | None = None,
    ) -> RunRecord | None:
        """Move a run to `target` if that is a legal forward move; None when DynamoDB refused it.

        `expected_status` / `expected_updated_at` narrow the condition to exactly what a caller
        observed (the batch trigger's stale reclaim), so a run that moved on is left alone.
        """
        names = {"#status": "status"}
        values: dict[str, Any] = {":target": {"S": target.value}, ":now": {"S": format_timestamp(now)}}
        sets = ["#status = :target", "updated_at = :now"]
        removes: list[str] = []
        if target.is_active:
            sets.append("active_status = :target")
        else:
            removes.append("active_status")
        for index, (name, value) in enumerate((fields or {}).items()):
            names[f"#f{index}"] = name
            values[f":f{index}"] = to_attribute(value)
            sets.append(f"#f{index} = :f{index}")
        allowed = [expected_status] if expected_status else list(allowed_predecessors(target))
        placeholders = []
        for index, status in enumerate(allowed):
            values[f":p{index}"] = {"S": status.value}
            placeholders.append(f":p{index}")
        condition = f"#status IN ({', '.join(placeholders)})"
        if expected_updated_at is not None:
            values[":expected_updated"] = {"S": expected_updated_at}
            condition += " AND updated_at = :expected_updated"
        expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key=self._key(run.job_id, run.started_at),
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        except Exception as exc:
            if _is_condition_failure(exc):
                return None
            raise
        return RunRecord.from_item(response["Attributes"])

    def record_execution(self, run: RunRef, execution_arn: str, unsupported: Sequence[str]) -> None:
        """Note the execution a run started and the files it skipped (no status change).

        Only `failed_files.unsupported` is set: the workflow may already have written the rest.
        """
        self._client.update_item(
            TableName=self._table,
            Key=self._key(run.job_id, run.started_at),
            UpdateExpression="SET execution_arn = :arn, failed_files.unsupported = :u",
            ConditionExpression="attribute_exists(job_id)",
            ExpressionAttributeValues={":arn": {"S": execution_arn}, ":u": to_attribute(list(unsupported))},
        )

    # -- pending runs (realtime folders) ----------------------------------------------------

    def claim_pending(self, job_id: str, candidate_started_at: str) -> str:
        """The started_at of the job's pending run, making `candidate` pending if none is.

        Callers create the candidate run before claiming, so a pending pointer always names a
        run that exists: a file never races a run that is still being written.
        """
        response = self._client.update_item(
            TableName=self._table,
            Key=self._key(job_id, HEAD_SORT_KEY),
            UpdateExpression="SET pending_started_at = if_not_exists(pending_started_at, :c)",
            ExpressionAttributeValues={":c": {"S": candidate_started_at}},
            ReturnValues="ALL_NEW",
        )
        return response["Attributes"]["pending_started_at"]["S"]

    def add_file_to_pending(self, run: RunRef, key: str, now: datetime) -> PendingAdd:
        """Add a file to a run that has not started yet.

        ALREADY_PRESENT means this file was added before: a redelivered event, whose first
        attempt may have died before announcing the run, so the caller announces it again.
        """
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key=self._key(run.job_id, run.started_at),
                UpdateExpression="ADD files :k SET updated_at = :now",
                ConditionExpression="attribute_exists(job_id) AND #status = :queued",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={
                    ":k": {"SS": [key]},
                    ":now": {"S": format_timestamp(now)},
                    ":queued": {"S": JobStatus.QUEUED.value},
                },
                ReturnValues="ALL_OLD",
            )
        except Exception as exc:
            if _is_condition_failure(exc):
                return PendingAdd.CLOSED
            raise
        before = response.get("Attributes", {}).get("files", {}).get("SS", [])
        return PendingAdd.ALREADY_PRESENT if key in before else PendingAdd.ADDED

    def clear_pending(self, run: RunRef) -> None:
        """Stop routing new files to `run` (it started, or it vanished); no-op if already moved on."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self._key(run.job_id, HEAD_SORT_KEY),
                UpdateExpression="REMOVE pending_started_at",
                ConditionExpression="pending_started_at = :s",
                ExpressionAttributeValues={":s": {"S": run.started_at}},
            )
        except Exception as exc:
            if not _is_condition_failure(exc):
                raise
