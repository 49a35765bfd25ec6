"""The reconciler's audit trail read back: what each repair observed, what it wrote, who, when.

Every applied repair is one item in the coordination table (`loop.Reconciler._audit`, kept 30
days): doc_key `audit#reconcile#<at>#<id>`, so keys sort by time. That table is keyed by doc_key
alone and also holds one claim per ingested file, so reading audit records by key prefix would be
a Scan of every claim. Audit items therefore also carry `audit_stream`, the hash key of the sparse
index `audit-by-time` (range key `at`, the record's time): only audit items are in it, and the newest N since a
moment are one Query that reads about N items. On a stack deployed before that index, and for
records written before it, `read_history` falls back to a paginated Scan with a begins_with
filter; it reads the whole table, and the result says so (`method`).

Pure: `AuditRecord.from_item`, `changes`, `actor_kind`, `history_since_key`. I/O: `read_history`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pipeline.jobs import format_timestamp

# The sparse index over audit items: hash `audit_stream` (the writer: the reconciler, or the
# runbook automation), range `at` (a timestamp).
AUDIT_INDEX = "audit-by-time"
AUDIT_STREAM_ATTRIBUTE = "audit_stream"
AUDIT_STREAM = "reconcile"
AUDIT_RETENTION = timedelta(days=30)


def audit_prefix(stream: str) -> str:
    """The doc_key prefix of one stream's records (`audit#<stream>#`): keys sort by time after it."""
    return f"audit#{stream}#"


AUDIT_PREFIX = audit_prefix(AUDIT_STREAM)


def audit_item(
    *,
    stream: str,
    action: str,
    target: str,
    reason: str,
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    by: str,
    now: datetime,
) -> dict[str, Any]:
    """One applied repair as a coordination-table item: what, why, before, after, when and by whom,
    kept 30 days. Every writer of the audit trail (reconciler, runbooks) builds its items here."""
    return {
        "doc_key": {"S": f"{audit_prefix(stream)}{format_timestamp(now)}#{uuid.uuid4().hex[:8]}"},
        AUDIT_STREAM_ATTRIBUTE: {"S": stream},  # puts it in the sparse index `audit-by-time`
        "action": {"S": action},
        "target": {"S": target},
        "reason": {"S": reason},
        "before": {"S": json.dumps(dict(before), sort_keys=True)},
        "after": {"S": json.dumps(dict(after), sort_keys=True)},
        "at": {"S": format_timestamp(now)},
        "by": {"S": by},
        "expiration_time": {"N": str(int((now + AUDIT_RETENTION).timestamp()))},
    }


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


def history_since_key(since: datetime, stream: str = AUDIT_STREAM) -> str:
    """The smallest doc_key of a record written after `since` (keys start with the timestamp)."""
    return f"{audit_prefix(stream)}{format_timestamp(since)}"


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


def read_history(
    dynamodb: Any,
    table: str,
    since: datetime,
    limit: int = 50,
    *,
    scan_without_index: bool = True,
    stream: str = AUDIT_STREAM,
) -> AuditHistory:
    """The newest `limit` repairs of `stream` written after `since`: a Query on the sparse index
    (about `limit` items read); on a table without it, a paginated Scan of the whole table, or
    nothing (method "unavailable") when `scan_without_index` is False."""
    if limit <= 0:
        return AuditHistory([], "query", False)
    try:
        return _query(dynamodb, table, since, limit, stream)
    except Exception as exc:  # a ClientError: AWS says ValidationException for a missing index, moto ResourceNotFound
        error = getattr(exc, "response", {}).get("Error", {})
        missing = error.get("Code") in ("ValidationException", "ResourceNotFoundException")
        if not missing or "index" not in str(error.get("Message", "")).lower():
            raise
    return _scan(dynamodb, table, since, limit, stream) if scan_without_index else AuditHistory([], "unavailable", False)


def _query(dynamodb: Any, table: str, since: datetime, limit: int, stream: str) -> AuditHistory:
    items: list[dict[str, Any]] = []
    read = 0
    start: dict[str, Any] | None = None
    while len(items) <= limit:  # one more than asked for says whether the window holds more
        request: dict[str, Any] = {
            "TableName": table,
            "IndexName": AUDIT_INDEX,
            "KeyConditionExpression": "#stream = :stream AND #at > :since",
            "ExpressionAttributeNames": {"#stream": AUDIT_STREAM_ATTRIBUTE, "#at": "at"},
            "ExpressionAttributeValues": {":stream": {"S": stream}, ":since": {"S": format_timestamp(since)}},
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


def _scan(dynamodb: Any, table: str, since: datetime, limit: int, stream: str) -> AuditHistory:
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
