"""The audit trail in the coordination table: every applied repair, and the reconciler's last run.

A store of its own, not the reconciler's: the items share a table with the semaphore and the
object claims, under key and index rules only this module knows, and more than one writer keeps
the trail (the reconciler today; an operator's runbook action is written the same way).

Every applied repair is one item, kept 30 days: doc_key `audit#<stream>#<at>#<id>`, so keys
sort by time. Two streams: `reconcile`, the reconciler's repairs of the semaphore and the runs
(scheduled, `pipeops reconcile --apply`, and the reconciler runbooks, which apply the reconciler
itself), listed by `pipeops reconcile --history`; and `runbook`, an operator's runbook actions
(redrives, replays, quarantines, re-runs), listed by `pipeops runbook history`. A stream is
its own key prefix and its own partition of the index, so neither listing reads the other's. That table is keyed by doc_key alone and also holds one claim per ingested file, so
reading audit records by key prefix would be a Scan of every claim. Audit items therefore also
carry `audit_stream`, the hash key of the sparse index `audit-by-time` (range key `at`, the
record's time): only audit items are in it, and the newest N since a moment are one Query that
reads about N items. On a stack deployed before that index, and for records written before it,
`AuditStore.history` falls back to a paginated Scan with a begins_with filter; it reads the whole
table, and the result says so (`method`).

Each write is conditional on its key being new, and the key's id is a hash of the record: the same
record written twice (a retried call, a repeated run at the same instant) is one item.

Pure: `AuditRecord.from_item`, `changes`, `actor_kind`, `history_since_key`. I/O: `AuditStore`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from pipeline.jobs import format_timestamp, parse_timestamp


class AuditStream(StrEnum):
    """Who keeps a trail: the reconciler's repairs, or an operator's runbook actions."""

    RECONCILE = "reconcile"
    RUNBOOK = "runbook"


def audit_prefix(stream: AuditStream) -> str:
    """The doc_key prefix of one stream's records."""
    return f"audit#{stream.value}#"


AUDIT_PREFIX = audit_prefix(AuditStream.RECONCILE)
# The sparse index over audit items: hash `audit_stream` (the stream), range `at` (a timestamp).
AUDIT_INDEX = "audit-by-time"
AUDIT_STREAM_ATTRIBUTE = "audit_stream"
AUDIT_STREAM = AuditStream.RECONCILE.value
AUDIT_RETENTION = timedelta(days=30)
# One item, overwritten by every applied reconcile: what `pipeops status` shows of the reconciler.
LAST_RUN_KEY = "reconcile#last-run"


@dataclass(frozen=True)
class AuditRecord:
    """One applied repair: the action, its target and why; what was observed and written."""

    at: str
    action: str
    target: str
    reason: str
    by: str
    before: Mapping[str, Any] = field(default_factory=dict)
    after: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> AuditRecord:
        def text(name: str) -> str:
            return str(item.get(name, {}).get("S", ""))

        return cls(
            at=text("at"),
            action=text("action"),
            target=text("target"),
            reason=text("reason"),
            by=text("by"),
            before=_json_object(text("before")),
            after=_json_object(text("after")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "action": self.action,
            "target": self.target,
            "reason": self.reason,
            "by": self.by,
            "by_kind": actor_kind(self.by),
            "before": dict(self.before),
            "after": dict(self.after),
            "changes": changes(self.before, self.after),
        }


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except json.JSONDecodeError:
        return {"unreadable": text}
    return value if isinstance(value, dict) else {"value": value}


def actor_kind(by: str) -> str:
    """"scheduled" for the reconciler's Lambda (its ARN or role session names a function),
    "person" for anyone else (a CLI user's ARN), "unknown" when the caller could not be named."""
    if not by or by.startswith("unknown"):
        return "unknown"
    return "scheduled" if ":function:" in by or by == "reconciler" else "person"  # handler.py's fallback


def changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """What the repair wrote, next to what it observed: `name: old -> new` for a value it set that
    was observed too, `name = new` for one it wrote outright, `name was old` for a condition only."""
    lines = [f"{name}: {before[name]} -> {value}" if name in before else f"{name} = {value}" for name, value in after.items()]
    lines += [f"{name} was {value}" for name, value in before.items() if name not in after]
    return lines


def history_since_key(since: datetime, stream: AuditStream = AuditStream.RECONCILE) -> str:
    """The smallest doc_key of a record written after `since` (keys start with the timestamp)."""
    return f"{audit_prefix(stream)}{format_timestamp(since)}"


def record_id(fields: Mapping[str, str]) -> str:
    """A record's id within its instant: the same record, the same id (so a second write is a no-op)."""
    return hashlib.sha256(json.dumps(dict(fields), sort_keys=True).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class AuditHistory:
    """The newest records first; `method` "query" (the index) or "scan" (no index: every item read)."""

    records: list[AuditRecord]
    method: str
    truncated: bool  # more records than the limit were written in the window
    items_read: int = 0  # what DynamoDB read for it (ScannedCount): the cost of the answer

    def to_dict(self) -> dict[str, Any]:
        return {
            "records": [r.to_dict() for r in self.records],
            "method": self.method,
            "truncated": self.truncated,
            "items_read": self.items_read,
        }


@dataclass(frozen=True)
class LastRun:
    """What the reconciler's last applied run found and did."""

    at: str
    by: str
    findings: list[dict[str, str]]  # the first findings listed: kind and target
    finding_count: int
    repairs: int
    races_lost: int
    remaining_findings: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "by": self.by,
            "findings": self.findings,
            "finding_count": self.finding_count,
            "repairs": self.repairs,
            "races_lost": self.races_lost,
            "remaining_findings": self.remaining_findings,
        }


class AuditStore:
    """Writes and reads of one stream's audit items. Takes a boto3 DynamoDB client (moto drops in).

    A record is put only if its key is new (its time and a hash of the record): a repeated write
    of the same record changes nothing. The last-run item is overwritten by whichever run applied
    last, which is what it reports.
    """

    def __init__(self, table_name: str, client: Any, stream: AuditStream = AuditStream.RECONCILE) -> None:
        self._table = table_name
        self._client = client
        self._stream = stream

    def record(
        self, *, action: str, target: str, reason: str, before: Mapping[str, Any], after: Mapping[str, Any], by: str, at: datetime
    ) -> None:
        """One applied repair: what, why, what was observed and written, by whom, when. Written
        once: the same record again (a retry) finds its key taken and changes nothing."""
        fields = {
            "action": action,
            "target": target,
            "reason": reason,
            "before": json.dumps(dict(before), sort_keys=True),
            "after": json.dumps(dict(after), sort_keys=True),
            "at": format_timestamp(at),
            "by": by,
        }
        item = {
            "doc_key": {"S": f"{audit_prefix(self._stream)}{fields['at']}#{record_id(fields)}"},
            AUDIT_STREAM_ATTRIBUTE: {"S": self._stream.value},  # puts it in the sparse index `audit-by-time`
            **{name: {"S": value} for name, value in fields.items()},
            "expiration_time": {"N": str(int((at + AUDIT_RETENTION).timestamp()))},
        }
        try:
            self._client.put_item(TableName=self._table, Item=item, ConditionExpression="attribute_not_exists(doc_key)")
        except Exception as exc:  # a ClientError: ConditionalCheckFailedException means written already
            if getattr(exc, "response", {}).get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise

    def record_last_run(self, run: LastRun) -> None:
        """Overwrite the last-run item (kept as long as a record written at its time)."""
        item = {
            "doc_key": {"S": LAST_RUN_KEY},
            "at": {"S": run.at},
            "by": {"S": run.by},
            "findings": {"S": json.dumps(run.findings)},
            "finding_count": {"N": str(run.finding_count)},
            "repairs": {"N": str(run.repairs)},
            "races_lost": {"N": str(run.races_lost)},
            "remaining_findings": {"N": str(run.remaining_findings)},
            "expiration_time": {"N": str(int((parse_timestamp(run.at) + AUDIT_RETENTION).timestamp()))},
        }
        self._client.put_item(TableName=self._table, Item=item)

    def last_run(self) -> LastRun | None:
        """The last applied run, or None if the reconciler never applied one."""
        item = self._client.get_item(TableName=self._table, Key={"doc_key": {"S": LAST_RUN_KEY}}).get("Item")
        if not item:
            return None
        return LastRun(
            at=item["at"]["S"],
            by=item["by"]["S"],
            findings=json.loads(item["findings"]["S"]),
            finding_count=int(item["finding_count"]["N"]),
            repairs=int(item["repairs"]["N"]),
            races_lost=int(item["races_lost"]["N"]),
            remaining_findings=int(item["remaining_findings"]["N"]),
        )

    def history(self, since: datetime, limit: int = 50, *, scan_without_index: bool = True) -> AuditHistory:
        """The newest `limit` repairs written after `since`: a Query on the sparse index (about
        `limit` items read); on a table without it, a paginated Scan of the whole table, or nothing
        (method "unavailable") when `scan_without_index` is False."""
        if limit <= 0:
            return AuditHistory([], "query", False)
        try:
            return _query(self._client, self._table, since, limit, self._stream)
        except Exception as exc:  # a ClientError: AWS says ValidationException for a missing index, moto ResourceNotFound
            error = getattr(exc, "response", {}).get("Error", {})
            missing = error.get("Code") in ("ValidationException", "ResourceNotFoundException")
            if not missing or "index" not in str(error.get("Message", "")).lower():
                raise
        return _scan(self._client, self._table, since, limit, self._stream) if scan_without_index else AuditHistory([], "unavailable", False)


def _query(dynamodb: Any, table: str, since: datetime, limit: int, stream: AuditStream) -> AuditHistory:
    items: list[dict[str, Any]] = []
    read = 0
    start: dict[str, Any] | None = None
    while len(items) <= limit:  # one more than asked for says whether the window holds more
        request: dict[str, Any] = {
            "TableName": table,
            "IndexName": AUDIT_INDEX,
            "KeyConditionExpression": "#stream = :stream AND #at > :since",
            "ExpressionAttributeNames": {"#stream": AUDIT_STREAM_ATTRIBUTE, "#at": "at"},
            "ExpressionAttributeValues": {":stream": {"S": stream.value}, ":since": {"S": format_timestamp(since)}},
            "ScanIndexForward": False,
            "Limit": limit + 1 - len(items),
        }
        if start:
            request["ExclusiveStartKey"] = start
        response = dynamodb.query(**request)
        items += response.get("Items", [])
        read += int(response.get("ScannedCount", 0))
        start = response.get("LastEvaluatedKey")
        if not start:
            break
    return AuditHistory([AuditRecord.from_item(i) for i in items[:limit]], "query", len(items) > limit, read)


def _scan(dynamodb: Any, table: str, since: datetime, limit: int, stream: AuditStream) -> AuditHistory:
    """Every page of the table (DynamoDB filters after reading): the cost of a table without the index."""
    items: list[dict[str, Any]] = []
    read = 0
    pages = dynamodb.get_paginator("scan").paginate(
        TableName=table,
        FilterExpression="begins_with(doc_key, :prefix) AND doc_key > :since",
        ExpressionAttributeValues={":prefix": {"S": audit_prefix(stream)}, ":since": {"S": history_since_key(since, stream)}},
    )
    for page in pages:
        items += page.get("Items", [])
        read += int(page.get("ScannedCount", 0))
    items.sort(key=lambda item: item["doc_key"]["S"], reverse=True)
    return AuditHistory([AuditRecord.from_item(i) for i in items[:limit]], "scan", len(items) > limit, read)
