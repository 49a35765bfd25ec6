"""S3 "object created" notifications in the shapes they reach a Lambda, parsed to plain data.

Both shapes URL-encode keys (a space arrives as '+', '/' may arrive as '%2F'): keys are decoded
with `unquote_plus` here and nowhere else. S3's `s3:TestEvent` carries no object and is skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus


@dataclass(frozen=True)
class ObjectCreated:
    bucket: str
    key: str
    size: int = 0


def _from_notification_record(record: Mapping[str, Any]) -> ObjectCreated | None:
    if not str(record.get("eventName", "")).startswith("ObjectCreated"):
        return None
    s3 = record.get("s3") or {}
    obj = s3.get("object") or {}
    if "key" not in obj:
        return None
    return ObjectCreated(s3["bucket"]["name"], unquote_plus(obj["key"]), int(obj.get("size", 0)))


def _from_eventbridge(event: Mapping[str, Any]) -> ObjectCreated | None:
    if event.get("detail-type") != "Object Created":
        return None
    detail = event.get("detail") or {}
    obj = detail.get("object") or {}
    return ObjectCreated(detail["bucket"]["name"], unquote_plus(obj["key"]), int(obj.get("size", 0)))


def parse_notification_body(body: str) -> list[ObjectCreated]:
    """Objects in one notification message (an S3 notification or an EventBridge event as JSON)."""
    data = json.loads(body)
    if "Records" in data:
        return [o for o in map(_from_notification_record, data["Records"]) if o]
    if data.get("Event") == "s3:TestEvent":
        return []
    created = _from_eventbridge(data)
    return [created] if created else []


def objects_in(event: Mapping[str, Any]) -> Iterator[tuple[str | None, ObjectCreated]]:
    """(message id or None, object) for every created object an ingest invocation carries.

    Accepts an EventBridge event, a direct S3 notification, or an SQS batch of either.
    """
    if "detail-type" in event:
        created = _from_eventbridge(event)
        if created:
            yield None, created
        return
    for record in event.get("Records", []):
        if record.get("eventSource") == "aws:sqs":
            for created in parse_notification_body(record["body"]):
                yield record["messageId"], created
        else:
            created = _from_notification_record(record)
            if created:
                yield None, created
