"""Every read of the tracking table's two indexes: what is active, and what ended when.

`active-jobs` is sparse: a run is in it only while `active_status` is set (QUEUED, IN_PROGRESS),
so reading it costs the work in flight, never the table's size. `by-status` keys every run by
(status, updated_at): the newest runs of a status are its first items. Nothing here scans.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pipeline.status import ACTIVE_STATUSES, JobStatus
from pipeline.stores.tracking import RunRecord

ACTIVE_INDEX = "active-jobs"
STATUS_INDEX = "by-status"


class RunIndex:
    """Queries of the tracking table's indexes. Takes a boto3 DynamoDB client (moto drops in)."""

    def __init__(self, table_name: str, client: Any) -> None:
        self._table = table_name
        self._client = client

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

    def count_active(self) -> dict[JobStatus, int]:
        """Runs in each active status, counted (Select=COUNT) on the sparse index."""
        counts: dict[JobStatus, int] = {}
        for status in ACTIVE_STATUSES:
            pages = self._client.get_paginator("query").paginate(
                TableName=self._table,
                IndexName=ACTIVE_INDEX,
                KeyConditionExpression="active_status = :s",
                ExpressionAttributeValues={":s": {"S": status.value}},
                Select="COUNT",
            )
            counts[status] = sum(page.get("Count", 0) for page in pages)
        return counts

    def newest(self, status: JobStatus, limit: int) -> list[RunRecord]:
        """The `limit` most recently updated runs in `status`, newest first, asking for no more
        than are still missing, so about `limit` items are read."""
        records: list[RunRecord] = []
        start: dict[str, Any] | None = None
        while len(records) < limit:
            response = self._client.query(**self._by_status(status, start, Limit=limit - len(records)))
            records += [RunRecord.from_item(item) for item in response.get("Items", [])]
            start = response.get("LastEvaluatedKey")
            if not start:
                break
        return records

    def ended_since(self, status: JobStatus, since: str, cap: int) -> tuple[list[str], bool]:
        """`updated_at` of the runs that reached `status` after `since`, newest first, at most `cap`
        (one attribute projected); True when the read stopped at the cap."""
        stamps: list[str] = []
        start: dict[str, Any] | None = None
        while True:
            request = self._by_status(status, start, since=since, ProjectionExpression="updated_at", Limit=cap - len(stamps))
            response = self._client.query(**request)
            stamps += [item["updated_at"]["S"] for item in response.get("Items", [])]
            start = response.get("LastEvaluatedKey")
            if not start:
                return stamps, False
            if len(stamps) >= cap:
                return stamps, True

    def last_ended_after(self, after: str) -> str | None:
        """When the latest run ended after `after` (COMPLETE or FAILED), or None: one item read
        per status, newest first."""
        latest: list[str] = []
        for status in (JobStatus.COMPLETE, JobStatus.FAILED):
            request = self._by_status(status, None, since=after, Limit=1, ProjectionExpression="updated_at")
            response = self._client.query(**request)
            latest += [item["updated_at"]["S"] for item in response.get("Items", [])]
        return max(latest, default=None)

    def _by_status(self, status: JobStatus, start: dict[str, Any] | None, *, since: str = "", **extra: Any) -> dict[str, Any]:
        """A newest-first query of the `by-status` index for one status (updated after `since`)."""
        condition = "#status = :s"
        values = {":s": {"S": status.value}}
        if since:
            condition += " AND updated_at > :since"
            values[":since"] = {"S": since}
        request: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": STATUS_INDEX,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": {"#status": "status"},
            "ExpressionAttributeValues": values,
            "ScanIndexForward": False,
            **extra,
        }
        if start:
            request["ExclusiveStartKey"] = start
        return request
