"""The semaphore with holders, on moto DynamoDB: idempotent acquire and release, never over max,
and the joint writes (admit, adopt, release_if) that change the slot and a guard item together."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from pipeline.stores._dynamodb import Cancellation, TransactionCancelledError
from pipeline.stores.semaphore import AcquireResult, JointWrite, ReleaseResult, Semaphore, joint_outcome

T0 = "2026-11-29T20:00:00.000000Z"


def semaphore(resources) -> Semaphore:
    return Semaphore(resources.coordination_table, resources.client("dynamodb"))


def test_acquire_counts_each_holder_once_and_refuses_beyond_the_max(resources) -> None:
    sem = semaphore(resources)
    assert sem.acquire("run-a", T0, max_slots=2) is AcquireResult.ACQUIRED
    assert sem.acquire("run-a", T0, max_slots=2) is AcquireResult.ALREADY_HELD
    assert sem.acquire("run-b", T0, max_slots=2) is AcquireResult.ACQUIRED
    assert sem.acquire("run-c", T0, max_slots=2) is AcquireResult.AT_CAPACITY
    state = sem.read()
    assert state.active_count == 2
    assert set(state.holders) == {"run-a", "run-b"}


def test_a_holder_at_capacity_is_still_recognised_as_holding(resources) -> None:
    sem = semaphore(resources)
    sem.acquire("run-a", T0, max_slots=1)
    assert sem.acquire("run-a", T0, max_slots=1) is AcquireResult.ALREADY_HELD


def test_release_is_idempotent_and_count_equals_holders(resources) -> None:
    sem = semaphore(resources)
    sem.acquire("run-a", T0, max_slots=3)
    sem.acquire("run-b", T0, max_slots=3)
    assert sem.release("run-a") is ReleaseResult.RELEASED
    assert sem.release("run-a") is ReleaseResult.NOT_HELD
    assert sem.release("never-held") is ReleaseResult.NOT_HELD
    state = sem.read()
    assert state.active_count == 1 == len(state.holders)


def test_release_never_takes_a_drifted_count_below_zero(resources) -> None:
    sem = semaphore(resources)
    sem.acquire("run-a", T0, max_slots=3)
    ddb = resources.client("dynamodb")
    ddb.update_item(
        TableName=resources.coordination_table,
        Key={"doc_key": {"S": "workflow_counter"}},
        UpdateExpression="SET active_count = :zero",
        ExpressionAttributeValues={":zero": {"N": "0"}},
    )
    assert sem.release("run-a") is ReleaseResult.RELEASED
    state = sem.read()
    assert state.active_count == 0
    assert state.holders == {}


def test_every_write_bumps_the_version(resources) -> None:
    sem = semaphore(resources)
    sem.acquire("run-a", T0, max_slots=3)
    sem.release("run-a")
    assert sem.read().version == 2


# -- joint writes: the slot and a guard item change together, or neither changes ---------------

GUARD_KEY = {"doc_key": {"S": "guard"}}


def guard_item(resources, expect: str, set_to: str | None = None) -> dict:
    """A TransactWriteItems entry on another item: requires `state = expect` (and writes `set_to`)."""
    if set_to is None:
        return {
            "ConditionCheck": {
                "TableName": resources.coordination_table,
                "Key": GUARD_KEY,
                "ConditionExpression": "#s = :expect",
                "ExpressionAttributeNames": {"#s": "state"},
                "ExpressionAttributeValues": {":expect": {"S": expect}},
            }
        }
    return {
        "Update": {
            "TableName": resources.coordination_table,
            "Key": GUARD_KEY,
            "UpdateExpression": "SET #s = :to",
            "ConditionExpression": "#s = :expect",
            "ExpressionAttributeNames": {"#s": "state"},
            "ExpressionAttributeValues": {":expect": {"S": expect}, ":to": {"S": set_to}},
        }
    }


def guard_state(resources) -> str:
    item = resources.client("dynamodb").get_item(TableName=resources.coordination_table, Key=GUARD_KEY)["Item"]
    return item["state"]["S"]


def set_guard(resources, state: str) -> None:
    resources.client("dynamodb").put_item(
        TableName=resources.coordination_table, Item={**GUARD_KEY, "state": {"S": state}}
    )


def assert_counted(sem: Semaphore, *holders: str) -> None:
    state = sem.read()
    assert set(state.holders) == set(holders)
    assert state.active_count == len(holders)


def test_admit_takes_the_slot_and_writes_the_guard_together(resources) -> None:
    sem = semaphore(resources)
    set_guard(resources, "queued")
    assert sem.admit("run-a", T0, 2, guard_item(resources, "queued", "frozen")) is JointWrite.DONE
    assert guard_state(resources) == "frozen"
    assert_counted(sem, "run-a")


def test_admit_writes_nothing_when_the_guard_is_refused(resources) -> None:
    sem = semaphore(resources)
    set_guard(resources, "frozen")
    assert sem.admit("run-a", T0, 2, guard_item(resources, "queued", "frozen")) is JointWrite.GUARD_REFUSED
    assert_counted(sem)
    assert sem.read().version == 0


def test_admit_writes_nothing_at_capacity_or_when_already_held(resources) -> None:
    sem = semaphore(resources)
    sem.acquire("run-a", T0, 1)
    set_guard(resources, "queued")
    assert sem.admit("run-b", T0, 1, guard_item(resources, "queued", "frozen")) is JointWrite.AT_CAPACITY
    assert sem.admit("run-a", T0, 1, guard_item(resources, "queued", "frozen")) is JointWrite.ALREADY_HELD
    assert guard_state(resources) == "queued"
    assert_counted(sem, "run-a")


def test_a_refused_guard_wins_over_what_the_semaphore_says(resources) -> None:
    """Both conditions failed: the caller's view of the guarded item is stale, so it looks again."""
    sem = semaphore(resources)
    sem.acquire("run-a", T0, 1)
    set_guard(resources, "frozen")
    assert sem.admit("run-a", T0, 1, guard_item(resources, "queued", "frozen")) is JointWrite.GUARD_REFUSED


def test_adopt_restamps_a_held_slot_without_counting_it_again(resources) -> None:
    sem = semaphore(resources)
    sem.acquire("run-a", T0, 1)
    set_guard(resources, "frozen")
    later = "2026-11-29T20:05:00.000000Z"
    assert sem.adopt("run-a", later, guard_item(resources, "frozen", "adopted")) is JointWrite.DONE
    assert sem.read().holders == {"run-a": later}
    assert_counted(sem, "run-a")
    assert guard_state(resources) == "adopted"
    assert sem.adopt("run-b", later, guard_item(resources, "adopted", "x")) is JointWrite.NOT_HELD
    assert guard_state(resources) == "adopted"
    assert_counted(sem, "run-a")


def test_release_if_gives_back_only_while_the_guard_holds(resources) -> None:
    sem = semaphore(resources)
    sem.acquire("run-a", T0, 2)
    sem.acquire("run-b", T0, 2)
    set_guard(resources, "mine")
    assert sem.release_if("run-a", guard_item(resources, "theirs")) is JointWrite.GUARD_REFUSED
    assert_counted(sem, "run-a", "run-b")
    assert sem.release_if("run-a", guard_item(resources, "mine")) is JointWrite.DONE
    assert sem.release_if("run-a", guard_item(resources, "mine")) is JointWrite.NOT_HELD  # idempotent
    assert_counted(sem, "run-b")


def test_release_if_never_takes_a_drifted_count_below_zero(resources) -> None:
    sem = semaphore(resources)
    sem.acquire("run-a", T0, 3)
    resources.client("dynamodb").update_item(
        TableName=resources.coordination_table,
        Key={"doc_key": {"S": "workflow_counter"}},
        UpdateExpression="SET active_count = :zero",
        ExpressionAttributeValues={":zero": {"N": "0"}},
    )
    set_guard(resources, "mine")
    assert sem.release_if("run-a", guard_item(resources, "mine")) is JointWrite.DONE
    assert_counted(sem)


def test_joint_outcome_reads_the_cancellation_reasons() -> None:
    failed, passed = "ConditionalCheckFailed", "None"
    holder = "run-a"
    held = Cancellation(failed, {"holders": {"M": {holder: {"S": T0}}}})
    full = Cancellation(failed, {"active_count": {"N": "2"}, "holders": {"M": {"run-b": {"S": T0}}}})
    assert joint_outcome(held, Cancellation(passed), holder, acquiring=True) is JointWrite.ALREADY_HELD
    assert joint_outcome(full, Cancellation(passed), holder, acquiring=True) is JointWrite.AT_CAPACITY
    assert joint_outcome(full, Cancellation(passed), holder, acquiring=False) is JointWrite.NOT_HELD
    assert joint_outcome(held, Cancellation(failed), holder, acquiring=True) is JointWrite.GUARD_REFUSED
    assert joint_outcome(Cancellation("TransactionConflict"), Cancellation(passed), holder, acquiring=True) is JointWrite.CONFLICT
    with pytest.raises(TransactionCancelledError):
        joint_outcome(Cancellation("ThrottlingError"), Cancellation(passed), holder, acquiring=True)


# -- the cap holds whatever the count says: admission is bounded by the holders too -------------

COUNTER_KEY = {"doc_key": {"S": "workflow_counter"}}


def hand_set_count(resources, value: int) -> None:
    """An operator "fixes" active_count in the console (holders untouched, version not bumped)."""
    resources.client("dynamodb").update_item(
        TableName=resources.coordination_table,
        Key=COUNTER_KEY,
        UpdateExpression="SET active_count = :v",
        ExpressionAttributeValues={":v": {"N": str(value)}},
    )


def raw_item(resources) -> dict:
    return resources.client("dynamodb").get_item(TableName=resources.coordination_table, Key=COUNTER_KEY)["Item"]


def test_a_count_set_below_its_holders_admits_no_one_beyond_the_max(resources) -> None:
    sem = semaphore(resources)
    sem.acquire("run-a", T0, 2)
    sem.acquire("run-b", T0, 2)
    hand_set_count(resources, -3)
    set_guard(resources, "queued")
    assert sem.acquire("run-c", T0, 2) is AcquireResult.AT_CAPACITY
    assert sem.admit("run-c", T0, 2, guard_item(resources, "queued", "frozen")) is JointWrite.AT_CAPACITY
    assert sem.while_full("run-c", 2, guard_item(resources, "queued")) is JointWrite.DONE  # still full for it
    assert guard_state(resources) == "queued"
    assert set(sem.read().holders) == {"run-a", "run-b"}
    assert sem.release("run-a") is ReleaseResult.RELEASED  # at the floor: the count stays -3
    assert sem.acquire("run-c", T0, 2) is AcquireResult.ACQUIRED  # one holder left: one slot free
    assert sem.acquire("run-d", T0, 2) is AcquireResult.AT_CAPACITY
    assert set(sem.read().holders) == {"run-b", "run-c"}


def test_the_first_holder_writes_the_map_and_holders_live_only_there(resources) -> None:
    sem = semaphore(resources)
    assert sem.acquire("run-a", T0, 2) is AcquireResult.ACQUIRED
    assert sem.acquire("run-b", T0, 2) is AcquireResult.ACQUIRED
    item = raw_item(resources)
    assert item["holders"] == {"M": {"run-a": {"S": T0}, "run-b": {"S": T0}}}
    assert [name for name in item if name.startswith("h#")] == []
    assert item["version"] == {"N": "2"}


def test_the_first_admission_writes_the_map_with_the_run(resources) -> None:
    sem = semaphore(resources)
    set_guard(resources, "queued")
    assert sem.admit("run-a", T0, 1, guard_item(resources, "queued", "frozen")) is JointWrite.DONE
    assert raw_item(resources)["holders"] == {"M": {"run-a": {"S": T0}}}
    assert guard_state(resources) == "frozen"


# -- items from before the map: holders as attributes of their own, migrated on first touch -----

LATER = "2026-11-29T20:05:00.000000Z"


def legacy_item(resources, named: dict[str, str], count: int, **extra: dict) -> None:
    resources.client("dynamodb").put_item(
        TableName=resources.coordination_table,
        Item={
            **COUNTER_KEY,
            "active_count": {"N": str(count)},
            "version": {"N": "7"},
            **{f"h#{name}": {"S": stamp} for name, stamp in named.items()},
            **extra,
        },
    )


def assert_migrated(resources, holders: dict[str, str]) -> None:
    item = raw_item(resources)
    assert item["holders"] == {"M": {name: {"S": stamp} for name, stamp in holders.items()}}
    assert [name for name in item if name.startswith("h#")] == []


def test_a_legacy_item_reads_as_before(resources) -> None:
    legacy_item(resources, {"run-a": T0, "run-b": LATER}, 2)
    state = semaphore(resources).read()
    assert (state.active_count, dict(state.holders), state.version) == (2, {"run-a": T0, "run-b": LATER}, 7)


def test_an_acquire_on_a_legacy_item_migrates_it_and_still_counts_its_holders(resources) -> None:
    legacy_item(resources, {"run-a": T0, "run-b": T0}, -3)  # the count is wrong, the holders are not
    sem = semaphore(resources)
    assert sem.acquire("run-c", T0, 2) is AcquireResult.AT_CAPACITY
    assert_migrated(resources, {"run-a": T0, "run-b": T0})
    assert sem.read().version == 8  # the migration is one write
    assert sem.acquire("run-a", T0, 3) is AcquireResult.ALREADY_HELD


def test_a_release_of_a_legacy_holder_migrates_and_releases_it(resources) -> None:
    legacy_item(resources, {"run-a": T0, "run-b": T0}, 2)
    sem = semaphore(resources)
    assert sem.release("run-a") is ReleaseResult.RELEASED
    assert_migrated(resources, {"run-b": T0})
    assert sem.read().active_count == 1


def test_the_reconciler_s_observed_release_works_on_a_legacy_holder(resources) -> None:
    legacy_item(resources, {"run-a": T0}, 1)
    sem = semaphore(resources)
    assert sem.release_observed("run-a", LATER) is ReleaseResult.NOT_HELD  # a stamp it never had
    assert sem.release_observed("run-a", T0) is ReleaseResult.RELEASED
    assert_migrated(resources, {})


def test_the_router_s_joint_writes_migrate_a_legacy_item(resources) -> None:
    legacy_item(resources, {"run-a": T0}, 1)
    sem = semaphore(resources)
    set_guard(resources, "queued")
    assert sem.adopt("run-a", LATER, guard_item(resources, "queued")) is JointWrite.DONE
    assert_migrated(resources, {"run-a": LATER})
    legacy_item(resources, {"run-a": T0}, 1)
    assert sem.admit("run-b", T0, 1, guard_item(resources, "queued", "frozen")) is JointWrite.AT_CAPACITY
    assert sem.admit("run-b", T0, 2, guard_item(resources, "queued", "frozen")) is JointWrite.DONE
    assert_migrated(resources, {"run-a": T0, "run-b": T0})
    assert sem.release_if("run-a", guard_item(resources, "frozen")) is JointWrite.DONE
    assert_counted(sem, "run-b")


def test_a_holder_written_the_old_way_beside_the_map_is_counted_and_released(resources) -> None:
    """During a deploy a function still on the old code writes `h#name` to a migrated item."""
    legacy_item(resources, {"old": T0}, 2, holders={"M": {"new": {"S": T0}}})
    sem = semaphore(resources)
    assert set(sem.read().holders) == {"old", "new"}
    assert sem.acquire("old", T0, 3) is AcquireResult.ALREADY_HELD
    assert_migrated(resources, {"old": T0, "new": T0})
    assert sem.release("old") is ReleaseResult.RELEASED
    assert_counted(sem, "new")


def test_a_migration_is_conditional_on_the_item_it_read(resources) -> None:
    from pipeline.stores.semaphore import migration_update

    legacy_item(resources, {"run-a": T0}, 1)
    sem = semaphore(resources)
    stale = migration_update(resources.coordination_table, COUNTER_KEY, raw_item(resources))
    assert sem.set_count(1, 7)  # a write in between
    ddb = resources.client("dynamodb")
    with pytest.raises(ddb.exceptions.ConditionalCheckFailedException):
        ddb.update_item(**stale)
    assert sem.migrate() is True and sem.migrate() is False
    assert_migrated(resources, {"run-a": T0})


def test_a_path_under_a_missing_map_refused_before_its_condition_reads_as_the_item(resources) -> None:
    """DynamoDB may refuse `SET holders.#h` on an item without the map (ValidationException)
    rather than evaluate the condition: the write then sees the item as it is, as on a failed
    condition."""
    legacy_item(resources, {"run-a": T0}, 1)
    sem = semaphore(resources)
    unguarded = {
        "TableName": resources.coordination_table,
        "Key": COUNTER_KEY,
        "UpdateExpression": "SET #hs.#h = :now",
        "ExpressionAttributeNames": {"#hs": "holders", "#h": "run-b"},
        "ExpressionAttributeValues": {":now": {"S": T0}},
    }
    assert sem._update(unguarded) == raw_item(resources)
    assert sem.acquire("run-b", T0, 2) is AcquireResult.ACQUIRED
    with pytest.raises(ClientError):  # with the map there, a missing path is a real error
        sem._update({**unguarded, "ExpressionAttributeNames": {"#hs": "elsewhere", "#h": "run-b"}})
