"""The tracking table: one item per run of a job, and one head item per job.

Run items: key (job_id, started_at). Status moves forward only: every status write carries a
ConditionExpression derived from `pipeline.status`, so a late or duplicated write is refused by
DynamoDB itself. `active_status` mirrors the status while the run is active and is removed when
it ends: it keys the sparse `active-jobs` index, so "which jobs are active" is a query, not a scan.

Head items: key (job_id, "#head"). `latest_started_at` lets the batch trigger read the latest run
of many jobs with two BatchGetItem calls instead of one query per job; `pending_started_at` names
the QUEUED run that still accepts files arriving in the job's folder (docs/ARCHITECTURE.md#files-dropped-by-folder-batching).
Realtime ingest sets both in the transaction that opens a run together with the object's claim
(`pipeline.stores.claims`, which builds those items with `queued_run_item` and `run_key`). The
index reads are `pipeline.stores.run_index`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pipeline.jobs import RunRef, format_timestamp
from pipeline.status import DeadlineCount, FailedFileKind, JobStatus, allowed_predecessors, empty_failed_files
from pipeline.stores._dynamodb import batch_get, from_item, get_each, is_condition_failure, to_attribute
from pipeline.stores.semaphore import Semaphore, SemaphoreState

HEAD_SORT_KEY = "#head"
RETENTION = timedelta(days=90)


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
    # Until when a message announcing the run may still be on its way to a router (the latest
    # send's delay plus a lease of capacity waits, renewed by the waits); past it plus a grace,
    # the run is unannounced.
    announce_deadline: str = ""
    announcements: int = 0  # times the reconciler announced it again
    # Who counted its files for the on-time objective, once ever (pipeline/deadline.py): "" not yet.
    deadline_counted: str = ""

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
            announce_deadline=data.get("announce_deadline", ""),
            announcements=int(data.get("announcements", 0)),
            deadline_counted=data.get("deadline_counted", ""),
        )


def run_expiry(now: datetime) -> int:
    """When a run item written now expires (its TTL attribute)."""
    return int((now + RETENTION).timestamp())


def run_key(job_id: str, sort_key: str) -> dict[str, Any]:
    """A tracking-table key: a run's (its start) or the job's head (HEAD_SORT_KEY)."""
    return {"job_id": {"S": job_id}, "started_at": {"S": sort_key}}


class TrackingStore:
    """Reads and conditional writes of job runs. Takes a boto3 DynamoDB client (moto drops in)."""

    def __init__(self, table_name: str, client: Any) -> None:
        self._table = table_name
        self._client = client

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
        announce_delay: int = 0,
    ) -> bool:
        """Write a new QUEUED run and (with `lead`) point the job's head at it. False if it exists."""
        try:
            self._client.put_item(
                TableName=self._table,
                Item=queued_run_item(run, files, bucket, now, extra, announce_delay),
                ConditionExpression="attribute_not_exists(job_id)",
            )
        except Exception as exc:
            if is_condition_failure(exc):
                return False
            raise
        if lead:
            self.advance_head(run, now)
        return True

    def advance_head(self, run: RunRef, now: datetime) -> None:
        try:
            self._client.update_item(
                TableName=self._table,
                Key=run_key(run.job_id, HEAD_SORT_KEY),
                UpdateExpression="SET latest_started_at = :s, expiration_time = :exp",
                ConditionExpression="attribute_not_exists(latest_started_at) OR latest_started_at < :s",
                ExpressionAttributeValues={":s": {"S": run.started_at}, ":exp": {"N": str(run_expiry(now))}},
            )
        except Exception as exc:
            if not is_condition_failure(exc):  # a newer run already leads: nothing to do
                raise

    def get_run(self, run: RunRef) -> RunRecord | None:
        response = self._client.get_item(
            TableName=self._table, Key=run_key(run.job_id, run.started_at), ConsistentRead=True
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
        heads = batch_get(self._client, self._table, [run_key(job_id, HEAD_SORT_KEY) for job_id in dict.fromkeys(job_ids)])
        run_keys = [
            run_key(head["job_id"]["S"], head["latest_started_at"]["S"])
            for head in heads
            if "latest_started_at" in head
        ]
        return {
            record.job_id: record for record in (RunRecord.from_item(i) for i in batch_get(self._client, self._table, run_keys))
        }

    def runs_by_ref(self, runs: Sequence[RunRef]) -> list[RunRecord]:
        """The runs of `runs` that exist (BatchGetItem, 100 a call)."""
        keys = [run_key(run.job_id, run.started_at) for run in dict.fromkeys(runs)]
        return [RunRecord.from_item(item) for item in batch_get(self._client, self._table, keys)]

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
        count_deadline: bool = False,
    ) -> RunRecord | None:
        """Move a run to `target` if that is a legal forward move; None when DynamoDB refused it.

        `expected_status` / `expected_updated_at` narrow the condition to exactly what a caller
        observed (the batch trigger's stale reclaim), so a run that moved on is left alone.
        `count_deadline` (a terminal `target`, by a caller that emits the count): the same write
        counts the run's files at their end unless the reconciler counted them overdue first; the
        returned record says which (`pipeline.deadline.ended_count`).
        """
        names = {"#status": "status"}
        values: dict[str, Any] = {":target": {"S": target.value}, ":now": {"S": format_timestamp(now)}}
        sets = ["#status = :target", "updated_at = :now"]
        removes: list[str] = []
        if target.is_active:
            sets.append("active_status = :target")
        else:
            removes.append("active_status")
            if count_deadline:
                sets.append("deadline_counted = if_not_exists(deadline_counted, :ended)")
                values[":ended"] = {"S": DeadlineCount.ENDED.value}
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
                Key=run_key(run.job_id, run.started_at),
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
            )
        except Exception as exc:
            if is_condition_failure(exc):
                return None
            raise
        return RunRecord.from_item(response["Attributes"])

    # -- the on-time objective: each run's files counted once (pipeline/deadline.py) ---------------

    def count_ended(self, run: RunRef) -> RunRecord | None:
        """Mark a terminal run's files counted at their end; the record, or None when the run is
        not terminal, is gone, or was counted already (at its end, or as overdue)."""
        terminal = [status for status in JobStatus if status.is_terminal]
        values = {":counted": {"S": DeadlineCount.ENDED.value}} | {f":t{i}": {"S": status.value} for i, status in enumerate(terminal)}
        condition = "attribute_not_exists(deadline_counted) AND #status IN (" + ", ".join(f":t{i}" for i in range(len(terminal))) + ")"
        return self._count(run, condition, {"#status": "status"}, values)

    def count_overdue(self, run: RunRef, queued_before: str) -> RunRecord | None:
        """Mark an active run queued before `queued_before` counted overdue; the record, or None
        when it ended, is gone, is younger, or was counted already."""
        condition = "attribute_not_exists(deadline_counted) AND attribute_exists(active_status) AND queued_at < :before"
        return self._count(run, condition, {}, {":counted": {"S": DeadlineCount.OVERDUE.value}, ":before": {"S": queued_before}})

    def _count(self, run: RunRef, condition: str, names: dict[str, str], values: dict[str, Any]) -> RunRecord | None:
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key=run_key(run.job_id, run.started_at),
                UpdateExpression="SET deadline_counted = :counted",
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
                **({"ExpressionAttributeNames": names} if names else {}),
            )
        except Exception as exc:
            if is_condition_failure(exc):
                return None
            raise
        return RunRecord.from_item(response["Attributes"])

    def record_execution(self, run: RunRef, execution_arn: str, unsupported: Sequence[str]) -> None:
        """Note the execution a run started and the files it skipped (no status change).

        Only `failed_files.unsupported` is set: the workflow may already have written the rest.
        """
        self._client.update_item(
            TableName=self._table,
            Key=run_key(run.job_id, run.started_at),
            UpdateExpression=f"SET execution_arn = :arn, failed_files.{FailedFileKind.UNSUPPORTED} = :u",
            ConditionExpression="attribute_exists(job_id)",
            ExpressionAttributeValues={":arn": {"S": execution_arn}, ":u": to_attribute(list(unsupported))},
        )

    # -- the job's pending run (realtime ingest) ----------------------------------------------

    def pending_run(self, job_id: str) -> RunRef | None:
        """The job's run that still accepts files, if any (its head's `pending_started_at`)."""
        response = self._client.get_item(
            TableName=self._table,
            Key=run_key(job_id, HEAD_SORT_KEY),
            ConsistentRead=True,
            ProjectionExpression="pending_started_at",
        )
        pending = response.get("Item", {}).get("pending_started_at", {}).get("S")
        return RunRef(job_id, pending) if pending else None

    def get_run_and_slots(self, run: RunRef, semaphore: Semaphore) -> tuple[RunRecord | None, SemaphoreState]:
        """The run and the semaphore, in one consistent BatchGetItem over the two tables: all the
        router decides from (admit, or wait for capacity without trying) costs one call."""
        table, key = semaphore.item_ref
        found = get_each(self._client, {self._table: run_key(run.job_id, run.started_at), table: key})
        item = found[self._table]
        return (RunRecord.from_item(item) if item else None), SemaphoreState.from_item(found[table])

    def clear_pending(self, run: RunRef) -> None:
        """Stop routing new files to `run` (it started, or it vanished); no-op if already moved on."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=run_key(run.job_id, HEAD_SORT_KEY),
                UpdateExpression="REMOVE pending_started_at",
                ConditionExpression="pending_started_at = :s",
                ExpressionAttributeValues={":s": {"S": run.started_at}},
            )
        except Exception as exc:
            if not is_condition_failure(exc):
                raise

    # -- announcements: is a message for the run still on its way? (the reconciler asks) -----

    def extend_announcement(self, run: RunRef, deadline: datetime) -> bool:
        """A message for the run was sent again (a capacity wait, a redelivery): it is announced
        until `deadline`. Only while it has no execution; False when it moved on (nothing to say)."""
        try:
            self._client.update_item(**self._lease_update(run, deadline))
        except Exception as exc:
            if is_condition_failure(exc):
                return False
            raise
        return True

    def lease_item(self, run: RunRef, deadline: datetime) -> dict[str, Any]:
        """`extend_announcement` as a TransactWriteItems entry (the guard of `Semaphore.while_full`)."""
        return {"Update": self._lease_update(run, deadline)}

    def _lease_update(self, run: RunRef, deadline: datetime) -> dict[str, Any]:
        return {
            "TableName": self._table,
            "Key": run_key(run.job_id, run.started_at),
            "UpdateExpression": "SET announce_deadline = :d",
            "ConditionExpression": "attribute_exists(job_id) AND attribute_not_exists(execution_arn) AND #status IN (:q, :p)",
            "ExpressionAttributeNames": {"#status": "status"},
            "ExpressionAttributeValues": {
                ":d": {"S": format_timestamp(deadline)},
                ":q": {"S": JobStatus.QUEUED.value},
                ":p": {"S": JobStatus.IN_PROGRESS.value},
            },
        }

    def record_reannouncement(
        self, run: RunRef, now: datetime, *, expected_status: JobStatus, expected_deadline: str
    ) -> bool:
        """The reconciler is about to announce the run again: count it and restart its deadline,
        conditional on the run being exactly as observed (a router that refreshed the deadline or
        started the run meanwhile wins). Written before the message is sent: a crash in between
        leaves an overdue run that the next reconcile finds again."""
        condition = "#status = :s AND attribute_not_exists(execution_arn) AND "
        values: dict[str, Any] = {
            ":s": {"S": expected_status.value},
            ":now": {"S": format_timestamp(now)},
            ":one": {"N": "1"},
        }
        if expected_deadline:
            condition += "announce_deadline = :d"
            values[":d"] = {"S": expected_deadline}
        else:
            condition += "attribute_not_exists(announce_deadline)"
        try:
            self._client.update_item(
                TableName=self._table,
                Key=run_key(run.job_id, run.started_at),
                UpdateExpression="SET announce_deadline = :now ADD announcements :one",
                ConditionExpression=condition,
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues=values,
            )
        except Exception as exc:
            if is_condition_failure(exc):
                return False
            raise
        return True

    def delete_unclaimed_run(self, run: RunRef, *, expected_updated_at: str) -> bool:
        """Delete a QUEUED run that holds no file's claim (a candidate that lost the claim race),
        conditional on it being unchanged since observed; the job's pending pointer follows."""
        try:
            self._client.delete_item(
                TableName=self._table,
                Key=run_key(run.job_id, run.started_at),
                ConditionExpression="#status = :q AND updated_at = :u AND attribute_not_exists(execution_arn)",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={":q": {"S": JobStatus.QUEUED.value}, ":u": {"S": expected_updated_at}},
            )
        except Exception as exc:
            if is_condition_failure(exc):
                return False
            raise
        self.clear_pending(run)
        return True

    # -- router admission: the run's half of the semaphore's joint writes (docs/ARCHITECTURE.md#semaphore) -----

    def admission_item(
        self, run: RunRef, now: datetime, token: str, *, expected_status: JobStatus, expected_files: int | None = None
    ) -> dict[str, Any]:
        """A TransactWriteItems entry: the run is IN_PROGRESS, its files frozen, admitted by `token`.

        Written only while the run is still `expected_status` (QUEUED: the freeze; IN_PROGRESS: a
        router carrying on for one that died) and no execution ARN is recorded. `admission` names
        the router invocation that may still call StartExecution last, so a router gives a slot
        back only while it is that invocation (`admitted_by_item`). With `expected_files`, only
        while the run holds that many files: its file set only grows, so the files the caller read
        are exactly the files frozen and it need not read the run again. No I/O: the semaphore runs it.
        """
        condition = "#status = :expected AND attribute_not_exists(execution_arn)"
        values = {
            ":target": {"S": JobStatus.IN_PROGRESS.value},
            ":now": {"S": format_timestamp(now)},
            ":token": {"S": token},
            ":expected": {"S": expected_status.value},
        }
        if expected_files == 0:
            condition += " AND attribute_not_exists(files)"
        elif expected_files is not None:
            condition += " AND size(files) = :files"
            values[":files"] = {"N": str(expected_files)}
        return {
            "Update": {
                "TableName": self._table,
                "Key": run_key(run.job_id, run.started_at),
                "UpdateExpression": (
                    "SET #status = :target, active_status = :target, updated_at = :now, admission = :token"
                ),
                "ConditionExpression": condition,
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": values,
            }
        }

    def admitted_by_item(self, run: RunRef, token: str) -> dict[str, Any]:
        """A TransactWriteItems ConditionCheck: `token` is still the run's latest admission, no ARN."""
        return {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": run_key(run.job_id, run.started_at),
                "ConditionExpression": "admission = :token AND attribute_not_exists(execution_arn)",
                "ExpressionAttributeValues": {":token": {"S": token}},
            }
        }


def queued_run_item(
    run: RunRef,
    files: Iterable[str],
    bucket: str,
    now: datetime,
    extra: Mapping[str, Any] | None = None,
    announce_delay: int = 0,
) -> dict[str, Any]:
    """A new QUEUED run as a DynamoDB item (one definition for batch and realtime creation)."""
    stamp = format_timestamp(now)
    item = {
        "announce_deadline": format_timestamp(now + timedelta(seconds=announce_delay)),
        "job_id": run.job_id,
        "started_at": run.started_at,
        "status": JobStatus.QUEUED.value,
        "active_status": JobStatus.QUEUED.value,
        "queued_at": stamp,
        "updated_at": stamp,
        "bucket": bucket,
        "execution_name": run.execution_name,
        "failed_files": empty_failed_files(),
        "expiration_time": run_expiry(now),
        **(extra or {}),
    }
    attributes = {k: to_attribute(v) for k, v in item.items()}
    keys = sorted(set(files))
    if keys:
        attributes["files"] = {"SS": keys}
    return attributes
