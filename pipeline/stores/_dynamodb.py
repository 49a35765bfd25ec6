"""What every DynamoDB store shares: item conversion and the reading of refused writes.

One place translates DynamoDB's errors into the stores' terms: a failed condition is an ordinary
result (a lost race), a cancelled transaction is read item by item, and a cancellation that an
immediate new attempt would not fix is the one `TransactionCancelledError`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, cast

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from pipeline.aws import error_code

CONDITION_FAILED = "ConditionalCheckFailed"  # a transaction item's cancellation reason code
CONFLICT_CODES = frozenset({"TransactionConflict", "None"})  # reasons a new look may fix

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


class TransactionCancelledError(RuntimeError):
    """DynamoDB cancelled a transaction for a reason an immediate new attempt would not fix
    (throttling, validation). The message names reason codes only, never item data."""


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
    return cast(dict[str, Any], _serializer.serialize(value))  # the stubs' AttributeValueTypeDef


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """A DynamoDB item as plain Python values."""
    return {k: _plain(_deserializer.deserialize(v)) for k, v in item.items()}


def is_condition_failure(exc: BaseException) -> bool:
    """A single-item write refused by its ConditionExpression: the world is not as the caller saw it."""
    return error_code(exc) == "ConditionalCheckFailedException"


@dataclass(frozen=True)
class Cancellation:
    """One item's reason in a cancelled transaction: its code and (ALL_OLD) the item as it was."""

    code: str
    item: Mapping[str, Any] | None = None
    message: str = ""

    @property
    def condition_failed(self) -> bool:
        return self.code == CONDITION_FAILED


def cancellations(exc: BaseException) -> list[Cancellation] | None:
    """The per-item reasons of a TransactionCanceledException, in item order; None for other errors."""
    if error_code(exc) != "TransactionCanceledException":
        return None
    reasons = getattr(exc, "response", {}).get("CancellationReasons") or []
    return [Cancellation(str(r.get("Code") or "None"), r.get("Item"), str(r.get("Message") or "")) for r in reasons]


BATCH_GET_LIMIT = 100  # keys per BatchGetItem
_BATCH_GET_ROUNDS = 8  # asks for keys left unprocessed (throttling), with a growing backoff


def batch_get(client: Any, table: str, keys: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items of `keys` in one table that exist, consistent reads, in batches of 100."""
    items: list[dict[str, Any]] = []
    for start in range(0, len(keys), BATCH_GET_LIMIT):
        request = {table: {"Keys": keys[start : start + BATCH_GET_LIMIT], "ConsistentRead": True}}
        for attempt in range(_BATCH_GET_ROUNDS):
            response = client.batch_get_item(RequestItems=request)
            items.extend(response.get("Responses", {}).get(table, []))
            request = response.get("UnprocessedKeys") or {}
            if not request:
                break
            time.sleep(min(2.0, 0.05 * 2**attempt))  # throttled keys: back off, then retry them
        else:
            raise RuntimeError("BatchGetItem left keys unprocessed after 8 attempts")
    return items


def get_each(client: Any, keys: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any] | None]:
    """One item per table (None where absent), consistent reads in one BatchGetItem; keys
    left unprocessed (throttling) are asked again after a backoff."""
    found: dict[str, dict[str, Any] | None] = dict.fromkeys(keys)
    request: dict[str, Any] = {table: {"Keys": [key], "ConsistentRead": True} for table, key in keys.items()}
    for attempt in range(_BATCH_GET_ROUNDS):
        response = client.batch_get_item(RequestItems=request)
        for table, items in response.get("Responses", {}).items():
            if items:
                found[table] = items[0]
        request = response.get("UnprocessedKeys") or {}
        if not request:
            return found
        time.sleep(min(2.0, 0.05 * 2**attempt))
    raise RuntimeError("BatchGetItem left keys unprocessed after 8 attempts")
