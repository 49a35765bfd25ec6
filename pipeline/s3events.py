"""S3's "Object Created" events, as EventBridge delivers them to ingest (template.yaml wires no
other source), parsed to plain data.

Keys. A classic S3 event notification (direct, or an SQS/SNS body) URL-encodes the key; AWS's
"Event message structure" page says so: "The object key name value is URL encoded. For example,
'red flower.jpg' becomes 'red+flower.jpg'"
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html).
For the same event delivered through EventBridge ("Object Created", `detail.object.key`) AWS's
"EventBridge event message structure" page says nothing about encoding, and its only sample key,
"example-key", has nothing to encode
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html). The published samples do
not settle it either: aws-powertools/powertools-lambda-python's fixture
tests/events/s3EventBridgeNotificationObjectCreatedEvent.json carries "IMG_m7fzo3.jpg". The
consumers AWS and others publish decode it: powertools' `S3EventBridgeNotificationObject.key`
(aws_lambda_powertools/utilities/data_classes/s3_event.py) returns `unquote_plus(key)`, OpenSearch
Data Prepper's `S3EventBridgeNotification` has `getUrlDecodedKey`; moto, by contrast, sends the
key raw. So the key is decoded here (`unquote_plus`, and nowhere else) and the key as
delivered is kept as well: ingest looks a decoded key up in its bucket and, when it is not there,
takes the key as delivered (`pipeline.ingest.pick_key`). A wrong guess about the encoding loses
no file.

Folder markers (a key ending in '/', as the S3 console's "Create folder" writes with size 0) are
not files, in realtime and batch mode alike (`pipeline.jobs.is_folder_marker`).

The event also names the object *version* it is about: `sequencer` (always, per key) and
the version id (when the bucket is versioned). Delivery is at least once, so ingest uses them to
tell a redelivery of one upload from a real overwrite of the same key (`compare_versions`).
"""

from __future__ import annotations

from collections.abc import Mapping
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
    key: str  # decoded
    size: int = 0
    version: ObjectVersion = field(default_factory=ObjectVersion)
    etag: str = ""  # as the event says, without quotes; "" when it does not
    delivered_key: str = ""  # the key exactly as the event carried it ("" when built by hand)

    def key_forms(self) -> tuple[str, ...]:
        """The keys this object may have in its bucket: decoded first (what AWS documents), then
        as delivered when that differs."""
        if self.delivered_key and self.delivered_key != self.key:
            return (self.key, self.delivered_key)
        return (self.key,)


def _version(sequencer: Any, version_id: Any) -> ObjectVersion:
    """S3 writes version id "null" for objects of an unversioned bucket: that is no version."""
    version = "" if version_id in (None, "null") else str(version_id)
    return ObjectVersion(str(sequencer or ""), version)


def _etag(value: Any) -> str:
    return str(value or "").strip('"')


def object_created(event: Mapping[str, Any]) -> ObjectCreated | None:
    """The object an EventBridge "Object Created" event is about (None: another event)."""
    if event.get("detail-type") != "Object Created":
        return None
    detail = event.get("detail") or {}
    obj = detail.get("object") or {}
    return ObjectCreated(
        detail["bucket"]["name"],
        unquote_plus(obj["key"]),
        int(obj.get("size", 0)),
        _version(obj.get("sequencer"), obj.get("version-id")),
        _etag(obj.get("etag")),
        str(obj["key"]),
    )
