"""The concurrency semaphore: `active_count` plus one attribute per holder, on one item.

Each acquire stores the holder (the execution name) with its acquire time and increments
`active_count` in the same conditional UpdateItem; release removes the holder and decrements
only if the holder was present. Both are idempotent, so `active_count` equals the number of
holders and a duplicate event can never push admission above the max (DESIGN.md §3).
`version` increases on every write so the reconciler can make its repairs conditional.

The router does not take or give back a slot on its own: it takes the slot and freezes the run
in one transaction (`admit`), carries on under a slot another invocation took (`adopt`), and
gives a slot back only while its own admission is still the run's latest (`release_if`). Each
of these is one TransactWriteItems over the semaphore item and a *guard* item the caller builds
(the run's side), so the slot and the run can never disagree, even with two routers on one run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pipeline.aws import error_code
from pipeline.config import SEMAPHORE_KEY

HOLDER_PREFIX = "h#"
CONDITION_FAILED = "ConditionalCheckFailed"  # a transaction item's cancellation reason code
CONFLICT_CODES = frozenset({"TransactionConflict", "None"})

# Take a slot: record the holder and count it, unless it is held already or every slot is taken.
_ACQUIRE_UPDATE = "SET #h = :now ADD active_count :one, version :one"
_ACQUIRE_CONDITION = "attribute_not_exists(#h) AND (attribute_not_exists(active_count) OR active_count < :max)"
# Give a slot back: drop the holder and uncount it; the floor variant for a count that drifted to 0.
_RELEASE_UPDATE = "REMOVE #h ADD active_count :minus, version :one"
_RELEASE_CONDITION = "attribute_exists(#h) AND active_count > :zero"
_RELEASE_AT_FLOOR_UPDATE = "REMOVE #h ADD version :one"
_RELEASE_AT_FLOOR_CONDITION = "attribute_exists(#h) AND (attribute_not_exists(active_count) OR active_count <= :zero)"
# A release's two calls are retried while a write between them moved the count (see release).
RELEASE_ROUNDS = 3


class AcquireResult(StrEnum):
    ACQUIRED = "acquired"
    ALREADY_HELD = "already_held"
    AT_CAPACITY = "at_capacity"


class ReleaseResult(StrEnum):
    RELEASED = "released"
    NOT_HELD = "not_held"


class JointWrite(StrEnum):
    """What a transaction over the semaphore item and a guard item did. Only DONE wrote anything."""

    DONE = "done"  # the semaphore write and the guard write happened together
    ALREADY_HELD = "already_held"  # admit: the holder exists already
    AT_CAPACITY = "at_capacity"  # admit: every slot is held
    NOT_HELD = "not_held"  # adopt / release_if: there is no such holder
    GUARD_REFUSED = "guard_refused"  # the guard item's condition failed: the caller's view is stale
    SLOT_FREE = "slot_free"  # while_full: a slot is free, or the holder has one
    CONFLICT = "conflict"  # a concurrent transaction held one of the items: look again


class TransactionCancelledError(RuntimeError):
    """DynamoDB cancelled the transaction for a reason looking again would not fix (throttling…)."""


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


@dataclass(frozen=True)
class Cancellation:
    """One item's reason in a cancelled transaction: its code and (ALL_OLD) the item as it was."""

    code: str
    item: Mapping[str, Any] | None = None

    @property
    def condition_failed(self) -> bool:
        return self.code == CONDITION_FAILED


def cancellations(exc: BaseException) -> list[Cancellation] | None:
    """The per-item reasons of a TransactionCanceledException, in item order; None for other errors."""
    if error_code(exc) != "TransactionCanceledException":
        return None
    reasons = getattr(exc, "response", {}).get("CancellationReasons") or []
    return [Cancellation(str(r.get("Code") or "None"), r.get("Item")) for r in reasons]


def joint_outcome(semaphore: Cancellation, guard: Cancellation, holder_attribute: str, *, acquiring: bool) -> JointWrite:
    """Why a transaction over (semaphore item, guard item) was cancelled. Pure.

    A refused guard wins: the caller decided on a view of the run that no longer holds, so what
    the semaphore said about it does not matter. A failed semaphore condition means, when
    acquiring, "held already" if the old item has the holder, else "at capacity"; when the
    holder had to exist, "not held". Conflicts are worth a new look; anything else raises.
    """
    if guard.condition_failed:
        return JointWrite.GUARD_REFUSED
    if semaphore.condition_failed:
        held = holder_attribute in (semaphore.item or {})
        if acquiring:
            return JointWrite.ALREADY_HELD if held else JointWrite.AT_CAPACITY
        return JointWrite.NOT_HELD
    if {semaphore.code, guard.code} <= CONFLICT_CODES:
        return JointWrite.CONFLICT
    raise TransactionCancelledError(f"transaction cancelled: {semaphore.code}, {guard.code}")


class Semaphore:
    """Slots for running executions, held by execution name."""

    def __init__(self, table_name: str, client: Any, key: str = SEMAPHORE_KEY) -> None:
        self._table = table_name
        self._client = client
        self._key = {"doc_key": {"S": key}}

    @property
    def item_ref(self) -> tuple[str, dict[str, Any]]:
        """(table, key) of the semaphore item: a caller may read it together with other items."""
        return self._table, dict(self._key)

    # -- single-item operations (tracker, batch trigger, reconciler, tests) ---------------------

    def acquire(self, holder: str, acquired_at: str, max_slots: int) -> AcquireResult:
        try:
            self._client.update_item(**self._acquire_update(holder, acquired_at, max_slots))
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            old = getattr(exc, "response", {}).get("Item") or {}
            if HOLDER_PREFIX + holder in old:
                return AcquireResult.ALREADY_HELD
            return AcquireResult.AT_CAPACITY
        return AcquireResult.ACQUIRED

    def release(self, holder: str) -> ReleaseResult:
        return self._release_with_floor(holder, self._release_update, lambda held: held is not None)

    def _release_with_floor(
        self, holder: str, build: Callable[..., dict[str, Any]], ours: Callable[[Mapping[str, Any] | None], bool]
    ) -> ReleaseResult:
        """Drop `holder` and uncount it; at a count that drifted to zero, drop it without a unit.

        Two conditional calls, so a write may land between them (an acquire raises the count): the
        floor call therefore holds only while the count is still at the floor, and while the old
        item (ALL_OLD) still shows the holder the pair is tried again. Never leaves the count off
        its holders by this race.
        """
        for _ in range(RELEASE_ROUNDS):
            for at_floor in (False, True):
                try:
                    self._client.update_item(**build(holder, at_floor=at_floor), ReturnValuesOnConditionCheckFailure="ALL_OLD")
                    return ReleaseResult.RELEASED
                except Exception as exc:
                    if error_code(exc) != "ConditionalCheckFailedException":
                        raise
                    old = getattr(exc, "response", {}).get("Item") or {}
            if not ours(old.get(HOLDER_PREFIX + holder)):
                return ReleaseResult.NOT_HELD  # a duplicate release (or, observed, a re-stamped holder)
        return ReleaseResult.NOT_HELD

    def read(self) -> SemaphoreState:
        response = self._client.get_item(TableName=self._table, Key=self._key, ConsistentRead=True)
        return SemaphoreState.from_item(response.get("Item"))

    # -- the reconciler's repairs: each conditional on exactly what it observed ------------------

    def release_observed(self, holder: str, acquired_at: str) -> ReleaseResult:
        """Release `holder` only if it still carries the acquire time that was observed.

        A router that adopted the slot since re-stamps it, and a holder released and taken again
        has a new time: either makes this a lost race (NOT_HELD), never a wrong release.
        """

        def observed(name: str, *, at_floor: bool) -> dict[str, Any]:
            update = self._release_update(name, at_floor=at_floor)
            update["ConditionExpression"] = update["ConditionExpression"].replace("attribute_exists(#h)", "#h = :seen")
            update["ExpressionAttributeValues"] = {**update["ExpressionAttributeValues"], ":seen": {"S": acquired_at}}
            return update

        return self._release_with_floor(holder, observed, lambda held: held == {"S": acquired_at})

    def set_count(self, active_count: int, expected_version: int) -> bool:
        """Set `active_count` (to the number of holders) if nothing wrote the item since it was read.

        Every write to the item bumps `version`, so the count is repaired only against the exact
        holders it was computed from. False: a lost race, left to the next reconcile.
        """
        condition = "version = :seen" if expected_version else "attribute_not_exists(version) OR version = :seen"
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self._key,
                UpdateExpression="SET active_count = :count ADD version :one",
                ConditionExpression=condition,
                ExpressionAttributeValues={
                    ":count": {"N": str(active_count)},
                    ":one": {"N": "1"},
                    ":seen": {"N": str(expected_version)},
                },
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return False
        return True

    # -- the router's joint writes: the slot and the run change together, or neither ------------

    def admit(self, holder: str, acquired_at: str, max_slots: int, guard: Mapping[str, Any]) -> JointWrite:
        """Take a slot for `holder` and write `guard` (a TransactWriteItems entry), atomically.

        DONE, ALREADY_HELD, AT_CAPACITY, GUARD_REFUSED or CONFLICT; only DONE wrote anything.
        """
        return self._joint(self._acquire_update(holder, acquired_at, max_slots), guard, holder, acquiring=True)

    def adopt(self, holder: str, adopted_at: str, guard: Mapping[str, Any]) -> JointWrite:
        """Carry on under a slot `holder` already has: re-stamp it and write `guard`, atomically.

        Takes no slot and changes no count. The new stamp tells an observer (the reconciler's
        grace period) that a router still works under this slot. DONE, NOT_HELD, GUARD_REFUSED
        or CONFLICT.
        """
        update = {
            "TableName": self._table,
            "Key": self._key,
            "UpdateExpression": "SET #h = :now ADD version :one",
            "ConditionExpression": "attribute_exists(#h)",
            "ExpressionAttributeNames": {"#h": HOLDER_PREFIX + holder},
            "ExpressionAttributeValues": {":now": {"S": adopted_at}, ":one": {"N": "1"}},
        }
        return self._joint(update, guard, holder, acquiring=False)

    def release_if(self, holder: str, guard: Mapping[str, Any]) -> JointWrite:
        """Give `holder`'s slot back only if `guard` (usually a ConditionCheck) holds, atomically.

        Same floor as `release`: a count that drifted to zero loses the holder, not a unit.
        DONE, NOT_HELD, GUARD_REFUSED or CONFLICT.
        """
        for _ in range(RELEASE_ROUNDS):
            for at_floor in (False, True):
                outcome = self._joint(self._release_update(holder, at_floor=at_floor), guard, holder, acquiring=False)
                if outcome is not JointWrite.NOT_HELD:
                    return outcome
            if holder not in self.read().holders:  # the count moved between the two, not the holder
                return JointWrite.NOT_HELD
        return JointWrite.NOT_HELD

    def while_full(self, holder: str, max_slots: int, guard: Mapping[str, Any]) -> JointWrite:
        """Write `guard` only while every slot is held and none by `holder`, atomically: a message
        that waits for capacity learns it still must, and renews its run's lease, in one call.

        Writes nothing to the semaphore. DONE, SLOT_FREE, GUARD_REFUSED or CONFLICT.
        """
        check = {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": self._key,
                "ConditionExpression": "attribute_not_exists(#h) AND active_count >= :max",
                "ExpressionAttributeNames": {"#h": HOLDER_PREFIX + holder},
                "ExpressionAttributeValues": {":max": {"N": str(max_slots)}},
            }
        }
        try:
            self._client.transact_write_items(TransactItems=[check, dict(guard)])
        except Exception as exc:
            reasons = cancellations(exc)
            if reasons is None:
                raise
            semaphore, guard_reason = _pad(reasons)
            if guard_reason.condition_failed:
                return JointWrite.GUARD_REFUSED
            if semaphore.condition_failed:
                return JointWrite.SLOT_FREE
            if {semaphore.code, guard_reason.code} <= CONFLICT_CODES:
                return JointWrite.CONFLICT
            raise TransactionCancelledError(f"transaction cancelled: {semaphore.code}, {guard_reason.code}") from None
        return JointWrite.DONE

    # -- building blocks ------------------------------------------------------------------------

    def _acquire_update(self, holder: str, acquired_at: str, max_slots: int) -> dict[str, Any]:
        return {
            "TableName": self._table,
            "Key": self._key,
            "UpdateExpression": _ACQUIRE_UPDATE,
            "ConditionExpression": _ACQUIRE_CONDITION,
            "ExpressionAttributeNames": {"#h": HOLDER_PREFIX + holder},
            "ExpressionAttributeValues": {
                ":now": {"S": acquired_at},
                ":one": {"N": "1"},
                ":max": {"N": str(max_slots)},
            },
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

    def _release_update(self, holder: str, *, at_floor: bool = False) -> dict[str, Any]:
        if at_floor:
            update, condition = _RELEASE_AT_FLOOR_UPDATE, _RELEASE_AT_FLOOR_CONDITION
            values = {":one": {"N": "1"}, ":zero": {"N": "0"}}
        else:
            update, condition = _RELEASE_UPDATE, _RELEASE_CONDITION
            values = {":minus": {"N": "-1"}, ":one": {"N": "1"}, ":zero": {"N": "0"}}
        return {
            "TableName": self._table,
            "Key": self._key,
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#h": HOLDER_PREFIX + holder},
            "ExpressionAttributeValues": values,
        }

    def _joint(self, update: Mapping[str, Any], guard: Mapping[str, Any], holder: str, *, acquiring: bool) -> JointWrite:
        semaphore_update = {**update, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
        try:
            self._client.transact_write_items(TransactItems=[{"Update": semaphore_update}, dict(guard)])
        except Exception as exc:
            reasons = cancellations(exc)
            if reasons is None:
                raise
            semaphore, guard_reason = _pad(reasons)
            return joint_outcome(semaphore, guard_reason, HOLDER_PREFIX + holder, acquiring=acquiring)
        return JointWrite.DONE


def _pad(reasons: Sequence[Cancellation]) -> tuple[Cancellation, Cancellation]:
    """(semaphore reason, guard reason); a missing reason reads as no reason given."""
    padded = [*reasons, Cancellation("None"), Cancellation("None")]
    return padded[0], padded[1]
