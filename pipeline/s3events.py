"""S3 "object created" notifications in the shapes they reach a Lambda, parsed to plain data.

Both shapes URL-encode keys (a space arrives as '+', '/' may arrive as '%2F'): keys are decoded
with `unquote_plus` here and nowhere else. S3's `s3:TestEvent` carries no object and is skipped.

Both shapes also name the object *version* an event is about: `sequencer` (always, per key) and
the version id (when the bucket is versioned). Delivery is at least once, so ingest uses them to
tell a redelivery of one upload from a real overwrite of the same key (`compare_versions`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from urllib.parse import unquote_plus


@dataclass(frozen=True)
class ObjectVersion:
    """Which write of a key an event is about. Empty strings: the event did not say."""

    sequencer: str = ""
    version_id: str = ""


class VersionOrder(StrEnum):
    NEWER = "newer"
    SAME = "same"
    OLDER = "older"
    UNORDERED = "unordered"  # nothing both sides carry tells them apart or orders them


def compare_sequencers(a: str, b: str) -> int:
    """-1, 0 or 1 as sequencer `a` is before, equal to or after `b` (for one key).

    S3 documents sequencers as hex strings to compare as strings after left-padding the shorter
    with zeros; their length is not fixed, so a plain string comparison would misorder them.
    """
    width = max(len(a), len(b))
    left, right = a.upper().rjust(width, "0"), b.upper().rjust(width, "0")
    return (left > right) - (left < right)


def compare_versions(event: ObjectVersion, claimed: ObjectVersion) -> VersionOrder:
    """How an event's version relates to the version already claimed for the same key.

    Sequencers order writes of a key, so they decide when both sides have one. Version ids only
    tell "same" from "different", never which is newer: a different one is UNORDERED.
    """
    if event.sequencer and claimed.sequencer:
        order = compare_sequencers(event.sequencer, claimed.sequencer)
        return VersionOrder.NEWER if order > 0 else VersionOrder.OLDER if order < 0 else VersionOrder.SAME
    if event.version_id and claimed.version_id and event.version_id == claimed.version_id:
        return VersionOrder.SAME
    return VersionOrder.UNORDERED


@dataclass(frozen=True)
class ObjectCreated:
    bucket: str
    key: str
    size: int = 0
    version: ObjectVersion = field(default_factory=ObjectVersion)


def _version(sequencer: Any, version_id: Any) -> ObjectVersion:
    """S3 writes version id "null" for objects of an unversioned bucket: that is no version."""
    version = "" if version_id in (None, "null") else str(version_id)
    return ObjectVersion(str(sequencer or ""), version)


def _from_notification_record(record: Mapping[str, Any]) -> ObjectCreated | None:
    if not str(record.get("eventName", "")).startswith("ObjectCreated"):
        return None
    s3 = record.get("s3") or {}
    obj = s3.get("object") or {}
    if "key" not in obj:
        return None
    return ObjectCreated(
        s3["bucket"]["name"],
        unquote_plus(obj["key"]),
        int(obj.get("size", 0)),
        _version(obj.get("sequencer"), obj.get("versionId")),
    )


def _from_eventbridge(event: Mapping[str, Any]) -> ObjectCreated | None:
    if event.get("detail-type") != "Object Created":
        return None
    detail = event.get("detail") or {}
    obj = detail.get("object") or {}
    return ObjectCreated(
        detail["bucket"]["name"],
        unquote_plus(obj["key"]),
        int(obj.get("size", 0)),
        _version(obj.get("sequencer"), obj.get("version-id")),
    )


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
