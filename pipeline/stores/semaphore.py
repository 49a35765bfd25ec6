"""The concurrency semaphore: `active_count` plus a map of holders, on one item.

Each acquire puts the holder (the execution name) with its acquire time into the `holders` map
and increments `active_count` in the same conditional UpdateItem; release removes the holder and
decrements only if the holder was present. Both are idempotent, so `active_count` equals the
number of holders and a duplicate event can never push admission above the max (docs/ARCHITECTURE.md#semaphore).
Admission is bounded twice, by the count *and* by the holders themselves (`size(holders) < :max`):
a count set below its holders by hand cannot let more executions in than the max.
`version` increases on every write so the reconciler can make its repairs conditional.

A path under a map that does not exist cannot be written (DynamoDB: ValidationException), so the
first holder ever writes the map whole. Items from before the map kept each holder in its own
attribute (`h#<name>`): the first write that meets such an item moves them into the map (one
write conditional on the version read), then does what it came for.

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
from pipeline.stores._dynamodb import (
    CONDITION_FAILED,
    CONFLICT_CODES,
    Cancellation,
    TransactionCancelledError,
    cancellations,
)

HOLDERS = "holders"  # the map attribute: execution name -> acquire time (ISO-8601)
LEGACY_HOLDER_PREFIX = "h#"  # before the map, each holder was an attribute of its own
MISSING_PATH = "document path"  # in DynamoDB's message for a path under a map that does not exist

# Take a slot: record the holder and count it, unless it is held already or every slot is taken,
# by the count or by the holders (either may be wrong; the max holds whichever is).
_ACQUIRE_UPDATE = "SET #hs.#h = :now ADD active_count :one, version :one"
_ACQUIRE_CONDITION = (
    "attribute_exists(#hs) AND attribute_not_exists(#hs.#h) AND attribute_not_exists(#lh)"
    " AND size(#hs) < :max AND (attribute_not_exists(active_count) OR active_count < :max)"
)
# The first holder ever: no map yet, so the map is written whole (with no holder, size 0 < max).
_FIRST_ACQUIRE_UPDATE = "SET #hs = :first ADD active_count :one, version :one"
_FIRST_ACQUIRE_CONDITION = (
    "attribute_not_exists(#hs) AND attribute_not_exists(#lh)"
    " AND (attribute_not_exists(active_count) OR active_count < :max)"
)
# Give a slot back: drop the holder and uncount it; the floor variant for a count that drifted to 0.
_RELEASE_UPDATE = "REMOVE #hs.#h ADD active_count :minus, version :one"
_RELEASE_CONDITION = "attribute_exists(#hs.#h) AND active_count > :zero"
_RELEASE_AT_FLOOR_UPDATE = "REMOVE #hs.#h ADD version :one"
_RELEASE_AT_FLOOR_CONDITION = "attribute_exists(#hs.#h) AND (attribute_not_exists(active_count) OR active_count <= :zero)"
# Every slot is taken and none by this holder (a ConditionCheck: the capacity wait's "still full?").
_FULL_CONDITION = (
    "attribute_not_exists(#hs.#h) AND attribute_not_exists(#lh)"
    " AND (active_count >= :max OR (attribute_exists(#hs) AND size(#hs) >= :max))"
)
# A release's two calls are retried while a write between them moved the count (see release).
RELEASE_ROUNDS = 3
# Tries of one write that met an item of the other shape (no map yet, or holders to migrate).
SHAPE_ROUNDS = 3


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
        return cls(
            active_count=int(item.get("active_count", {}).get("N", "0")),
            holders=holders_of(item),
            version=int(item.get("version", {}).get("N", "0")),
        )


# -- the item's shape (pure) ------------------------------------------------------------------------


def has_map(item: Mapping[str, Any]) -> bool:
    return "M" in item.get(HOLDERS, {})


def legacy_holders(item: Mapping[str, Any]) -> dict[str, str]:
    """Holders kept as attributes of their own (items written before the map)."""
    return {
        name[len(LEGACY_HOLDER_PREFIX) :]: value["S"]
        for name, value in item.items()
        if name.startswith(LEGACY_HOLDER_PREFIX) and "S" in value
    }


def holders_of(item: Mapping[str, Any]) -> dict[str, str]:
    """Every holder the item names: the map's, and any still kept as attributes (the map wins)."""
    mapped = {name: value["S"] for name, value in item.get(HOLDERS, {}).get("M", {}).items() if "S" in value}
    return {**legacy_holders(item), **mapped}


def needs_migration(item: Mapping[str, Any], holder: str) -> bool:
    """The item keeps `holder`, or (with no map yet) any holder, in an attribute of its own: no
    decision about `holder` may rest on it before those holders are in the map."""
    legacy = legacy_holders(item)
    return holder in legacy or (bool(legacy) and not has_map(item))


def migration_update(table: str, key: Mapping[str, Any], item: Mapping[str, Any]) -> dict[str, Any] | None:
    """The UpdateItem that moves the item's attribute holders into the map, conditional on the
    item being exactly as read (its version); None when there is nothing to move. Pure.

    Writes the map whole when there is none, else adds the entries it lacks (a name in both keeps
    the map's stamp). Bumps `version`, as every write does; leaves `active_count` as it is.
    """
    legacy = legacy_holders(item)
    if not legacy:
        return None
    names: dict[str, str] = {"#hs": HOLDERS}
    values: dict[str, Any] = {":one": {"N": "1"}}
    removes = []
    for i, name in enumerate(sorted(legacy)):
        names[f"#l{i}"] = LEGACY_HOLDER_PREFIX + name
        removes.append(f"#l{i}")
    mapped = item.get(HOLDERS, {}).get("M", {})
    if has_map(item):
        sets = []
        for i, name in enumerate(sorted(set(legacy) - set(mapped))):
            names[f"#n{i}"], values[f":v{i}"] = name, {"S": legacy[name]}
            sets.append(f"#hs.#n{i} = :v{i}")
        condition = "attribute_exists(#hs)"
    else:
        sets = ["#hs = :m"]
        values[":m"] = {"M": {name: {"S": stamp} for name, stamp in legacy.items()}}
        condition = "attribute_not_exists(#hs)"
    version = item.get("version", {}).get("N")
    if version is None:
        condition += " AND attribute_not_exists(version)"
    else:
        condition += " AND version = :seen"
        values[":seen"] = {"N": version}
    update = (f"SET {', '.join(sets)} " if sets else "") + f"REMOVE {', '.join(removes)} ADD version :one"
    return {
        "TableName": table,
        "Key": dict(key),
        "UpdateExpression": update,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


def joint_outcome(semaphore: Cancellation, guard: Cancellation, holder: str, *, acquiring: bool) -> JointWrite:
    """Why a transaction over (semaphore item, guard item) was cancelled. Pure.

    A refused guard wins: the caller decided on a view of the run that no longer holds, so what
    the semaphore said about it does not matter. A failed semaphore condition means, when
    acquiring, "held already" if the old item has the holder, else "at capacity"; when the
    holder had to exist, "not held". Conflicts are worth a new look; anything else raises.
    """
    if guard.condition_failed:
        return JointWrite.GUARD_REFUSED
    if semaphore.condition_failed:
        held = holder in holders_of(semaphore.item or {})
        if acquiring:
            return JointWrite.ALREADY_HELD if held else JointWrite.AT_CAPACITY
        return JointWrite.NOT_HELD
    if {semaphore.code, guard.code} <= CONFLICT_CODES:
        return JointWrite.CONFLICT
    raise TransactionCancelledError(f"transaction cancelled: {semaphore.code}, {guard.code}")


def _missing_path(code: str, message: str) -> bool:
    """DynamoDB refused a write to a path under a map the item does not have."""
    return code in ("ValidationException", "ValidationError") and MISSING_PATH in message


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
        """ACQUIRED, ALREADY_HELD or AT_CAPACITY (also when the item kept changing shape: nothing written)."""
        first = False
        for _ in range(SHAPE_ROUNDS):
            old = self._update(self._acquire_update(holder, acquired_at, max_slots, first=first))
            if old is None:
                return AcquireResult.ACQUIRED
            if needs_migration(old, holder):
                self.migrate()
                continue
            if has_map(old) == first:  # the write did not fit the item's shape: the other one does
                first = not first
                continue
            return AcquireResult.ALREADY_HELD if holder in holders_of(old) else AcquireResult.AT_CAPACITY
        return AcquireResult.AT_CAPACITY

    def release(self, holder: str) -> ReleaseResult:
        return self._release_with_floor(holder, self._release_update, lambda held: held is not None)

    def _release_with_floor(
        self, holder: str, build: Callable[..., dict[str, Any]], ours: Callable[[str | None], bool]
    ) -> ReleaseResult:
        """Drop `holder` and uncount it; at a count that drifted to zero, drop it without a unit.

        Two conditional calls, so a write may land between them (an acquire raises the count): the
        floor call therefore holds only while the count is still at the floor, and while the old
        item (ALL_OLD) still shows the holder the pair is tried again. Never leaves the count off
        its holders by this race.
        """
        for _ in range(RELEASE_ROUNDS):
            old: Mapping[str, Any] = {}
            for at_floor in (False, True):
                refused = self._update(build(holder, at_floor=at_floor))
                if refused is None:
                    return ReleaseResult.RELEASED
                old = refused
            if needs_migration(old, holder):
                self.migrate()
                continue
            if not ours(holders_of(old).get(holder)):
                return ReleaseResult.NOT_HELD  # a duplicate release (or, observed, a re-stamped holder)
        return ReleaseResult.NOT_HELD

    def read(self) -> SemaphoreState:
        return SemaphoreState.from_item(self._get())

    def migrate(self) -> bool:
        """Move holders kept as attributes of their own into the map (items from before it).

        Conditional on the version read, so a write in between makes it read and try again. True
        if this call moved them; False if there was nothing to move (or it kept losing races).
        """
        for _ in range(SHAPE_ROUNDS):
            request = migration_update(self._table, self._key, self._get())
            if request is None:
                return False
            if self._update(request) is None:
                return True
        return False

    # -- the reconciler's repairs: each conditional on exactly what it observed ------------------

    def release_observed(self, holder: str, acquired_at: str) -> ReleaseResult:
        """Release `holder` only if it still carries the acquire time that was observed.

        A router that adopted the slot since re-stamps it, and a holder released and taken again
        has a new time: either makes this a lost race (NOT_HELD), never a wrong release.
        """

        def observed(name: str, *, at_floor: bool) -> dict[str, Any]:
            update = self._release_update(name, at_floor=at_floor)
            update["ConditionExpression"] = update["ConditionExpression"].replace("attribute_exists(#hs.#h)", "#hs.#h = :seen")
            update["ExpressionAttributeValues"] = {**update["ExpressionAttributeValues"], ":seen": {"S": acquired_at}}
            return update

        return self._release_with_floor(holder, observed, lambda held: held == acquired_at)

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
        return self._joint(
            lambda first: self._acquire_update(holder, acquired_at, max_slots, first=first), guard, holder, acquiring=True
        )

    def adopt(self, holder: str, adopted_at: str, guard: Mapping[str, Any]) -> JointWrite:
        """Carry on under a slot `holder` already has: re-stamp it and write `guard`, atomically.

        Takes no slot and changes no count. The new stamp tells an observer (the reconciler's
        grace period) that a router still works under this slot. DONE, NOT_HELD, GUARD_REFUSED
        or CONFLICT.
        """
        update = {
            "TableName": self._table,
            "Key": self._key,
            "UpdateExpression": "SET #hs.#h = :now ADD version :one",
            "ConditionExpression": "attribute_exists(#hs.#h)",
            "ExpressionAttributeNames": {"#hs": HOLDERS, "#h": holder},
            "ExpressionAttributeValues": {":now": {"S": adopted_at}, ":one": {"N": "1"}},
        }
        return self._joint(lambda _: update, guard, holder, acquiring=False)

    def release_if(self, holder: str, guard: Mapping[str, Any]) -> JointWrite:
        """Give `holder`'s slot back only if `guard` (usually a ConditionCheck) holds, atomically.

        Same floor as `release`: a count that drifted to zero loses the holder, not a unit.
        DONE, NOT_HELD, GUARD_REFUSED or CONFLICT.
        """
        for _ in range(RELEASE_ROUNDS):
            for at_floor in (False, True):
                update = self._release_update(holder, at_floor=at_floor)
                outcome = self._joint(lambda _, update=update: update, guard, holder, acquiring=False)  # type: ignore[misc]  # mypy infers no lambda with a default
                if outcome is not JointWrite.NOT_HELD:
                    return outcome
            if holder not in self.read().holders:  # the count moved between the two, not the holder
                return JointWrite.NOT_HELD
        return JointWrite.NOT_HELD

    def while_full(self, holder: str, max_slots: int, guard: Mapping[str, Any]) -> JointWrite:
        """Write `guard` only while every slot is held (by the count or by the holders) and none by
        `holder`, atomically: a message that waits for capacity learns it still must, and renews
        its run's lease, in one call.

        Writes nothing to the semaphore. DONE, SLOT_FREE, GUARD_REFUSED or CONFLICT.
        """
        check = {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": self._key,
                "ConditionExpression": _FULL_CONDITION,
                "ExpressionAttributeNames": {"#hs": HOLDERS, "#h": holder, "#lh": LEGACY_HOLDER_PREFIX + holder},
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

    def _get(self) -> dict[str, Any]:
        response = self._client.get_item(TableName=self._table, Key=self._key, ConsistentRead=True)
        return response.get("Item") or {}

    def _update(self, request: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """One conditional UpdateItem: None if it wrote, else the item as it was (ALL_OLD; {} for
        none). A path under a missing map refused before the condition is read the same way."""
        try:
            self._client.update_item(**request, ReturnValuesOnConditionCheckFailure="ALL_OLD")
        except Exception as exc:
            code = error_code(exc)
            if code == "ConditionalCheckFailedException":
                return getattr(exc, "response", {}).get("Item") or {}
            message = str(getattr(exc, "response", {}).get("Error", {}).get("Message", ""))
            if not _missing_path(code, message):
                raise
            item = self._get()
            if has_map(item):
                raise
            return item
        return None

    def _acquire_update(self, holder: str, acquired_at: str, max_slots: int, *, first: bool = False) -> dict[str, Any]:
        names = {"#hs": HOLDERS, "#lh": LEGACY_HOLDER_PREFIX + holder}
        values: dict[str, Any] = {":one": {"N": "1"}, ":max": {"N": str(max_slots)}}
        if first:
            update, condition = _FIRST_ACQUIRE_UPDATE, _FIRST_ACQUIRE_CONDITION
            values[":first"] = {"M": {holder: {"S": acquired_at}}}
        else:
            update, condition = _ACQUIRE_UPDATE, _ACQUIRE_CONDITION
            names["#h"] = holder
            values[":now"] = {"S": acquired_at}
        return {
            "TableName": self._table,
            "Key": self._key,
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
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
            "ExpressionAttributeNames": {"#hs": HOLDERS, "#h": holder},
            "ExpressionAttributeValues": values,
        }

    def _joint(
        self, build: Callable[[bool], Mapping[str, Any]], guard: Mapping[str, Any], holder: str, *, acquiring: bool
    ) -> JointWrite:
        """One transaction over the semaphore item (`build(first)`) and `guard`. An item of the
        other shape (no map yet, or holders to migrate) is brought to this one and tried again."""
        first = False
        for _ in range(SHAPE_ROUNDS):
            semaphore_update = {**build(first), "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
            try:
                self._client.transact_write_items(TransactItems=[{"Update": semaphore_update}, dict(guard)])
                return JointWrite.DONE
            except Exception as exc:
                semaphore, guard_reason = self._reasons(exc)
            if semaphore.condition_failed and not guard_reason.condition_failed:
                old = semaphore.item or {}
                if needs_migration(old, holder):
                    self.migrate()
                    continue
                if acquiring and has_map(old) == first:
                    first = not first
                    continue
            return joint_outcome(semaphore, guard_reason, holder, acquiring=acquiring)
        return JointWrite.CONFLICT  # the item kept changing shape: look again

    def _reasons(self, exc: Exception) -> tuple[Cancellation, Cancellation]:
        """(semaphore reason, guard reason) of a refused transaction. A path under a missing map
        (a ValidationException, or in a cancellation a ValidationError) reads as the semaphore's
        condition failing on the item as it is; any other error is raised."""
        reasons = cancellations(exc)
        if reasons is None:
            message = str(getattr(exc, "response", {}).get("Error", {}).get("Message", ""))
            if not _missing_path(error_code(exc), message):
                raise exc
            semaphore, guard_reason = Cancellation("ValidationError", message=message), Cancellation("None")
        else:
            semaphore, guard_reason = _pad(reasons)
        if _missing_path(semaphore.code, semaphore.message):
            item = self._get()
            if has_map(item):
                raise exc
            semaphore = Cancellation(CONDITION_FAILED, item)
        return semaphore, guard_reason


def _pad(reasons: Sequence[Cancellation]) -> tuple[Cancellation, Cancellation]:
    """(semaphore reason, guard reason); a missing reason reads as no reason given."""
    padded = [*reasons, Cancellation("None"), Cancellation("None")]
    return padded[0], padded[1]
