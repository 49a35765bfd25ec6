"""The concurrency semaphore: `active_count` plus one attribute per holder, on one item.

Each acquire stores the holder (the execution name) with its acquire time and increments
`active_count` in the same conditional UpdateItem; release removes the holder and decrements
only if the holder was present. Both are idempotent, so `active_count` equals the number of
holders and a duplicate event can never push admission above the max (DESIGN.md §3).
`version` increases on every write so the reconciler can make its repairs conditional.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pipeline.aws import error_code
from pipeline.config import SEMAPHORE_KEY

HOLDER_PREFIX = "h#"


class AcquireResult(StrEnum):
    ACQUIRED = "acquired"
    ALREADY_HELD = "already_held"
    AT_CAPACITY = "at_capacity"


class ReleaseResult(StrEnum):
    RELEASED = "released"
    NOT_HELD = "not_held"


@dataclass(frozen=True)
class SemaphoreState:
    """What the semaphore item holds, as plain data (for status views and the reconciler)."""

    active_count: int
    holders: Mapping[str, str]  # execution name -> acquire time (ISO-8601)
    version: int

    @classmethod
    def from_item(cls, item: Mapping[str, Any] | None) -> SemaphoreState:
        if not item:
            return cls(active_count=0, holders={}, version=0)
        holders = {
            name[len(HOLDER_PREFIX) :]: value["S"]
            for name, value in item.items()
            if name.startswith(HOLDER_PREFIX) and "S" in value
        }
        return cls(
            active_count=int(item.get("active_count", {}).get("N", "0")),
            holders=holders,
            version=int(item.get("version", {}).get("N", "0")),
        )


class Semaphore:
    """Slots for running executions, held by execution name."""

    def __init__(self, table_name: str, client: Any, key: str = SEMAPHORE_KEY) -> None:
        self._table = table_name
        self._client = client
        self._key = {"doc_key": {"S": key}}

    def acquire(self, holder: str, acquired_at: str, max_slots: int) -> AcquireResult:
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self._key,
                UpdateExpression="SET #h = :now ADD active_count :one, version :one",
                ConditionExpression=(
                    "attribute_not_exists(#h) AND "
                    "(attribute_not_exists(active_count) OR active_count < :max)"
                ),
                ExpressionAttributeNames={"#h": HOLDER_PREFIX + holder},
                ExpressionAttributeValues={
                    ":now": {"S": acquired_at},
                    ":one": {"N": "1"},
                    ":max": {"N": str(max_slots)},
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            old = getattr(exc, "response", {}).get("Item") or {}
            if HOLDER_PREFIX + holder in old:
                return AcquireResult.ALREADY_HELD
            return AcquireResult.AT_CAPACITY
        return AcquireResult.ACQUIRED

    def release(self, holder: str) -> ReleaseResult:
        names = {"#h": HOLDER_PREFIX + holder}
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self._key,
                UpdateExpression="REMOVE #h ADD active_count :minus, version :one",
                ConditionExpression="attribute_exists(#h) AND active_count > :zero",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={":minus": {"N": "-1"}, ":one": {"N": "1"}, ":zero": {"N": "0"}},
            )
            return ReleaseResult.RELEASED
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
        # Either not held (a duplicate release) or held while the count already drifted to zero:
        # then drop the holder without taking the count below zero.
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self._key,
                UpdateExpression="REMOVE #h ADD version :one",
                ConditionExpression="attribute_exists(#h)",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={":one": {"N": "1"}},
            )
            return ReleaseResult.RELEASED
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
        return ReleaseResult.NOT_HELD

    def read(self) -> SemaphoreState:
        response = self._client.get_item(TableName=self._table, Key=self._key, ConsistentRead=True)
        return SemaphoreState.from_item(response.get("Item"))
