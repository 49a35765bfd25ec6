"""The semaphore with holders, on moto DynamoDB: idempotent acquire and release, never over max,
and the joint writes (admit, adopt, release_if) that change the slot and a guard item together."""

from __future__ import annotations

import pytest

from pipeline.stores.semaphore import (
    AcquireResult,
    Cancellation,
    JointWrite,
    ReleaseResult,
    Semaphore,
    TransactionCancelledError,
    joint_outcome,
)

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
    holder = "h#run-a"
    held = Cancellation(failed, {holder: {"S": T0}})
    full = Cancellation(failed, {"active_count": {"N": "2"}})
    assert joint_outcome(held, Cancellation(passed), holder, acquiring=True) is JointWrite.ALREADY_HELD
    assert joint_outcome(full, Cancellation(passed), holder, acquiring=True) is JointWrite.AT_CAPACITY
    assert joint_outcome(full, Cancellation(passed), holder, acquiring=False) is JointWrite.NOT_HELD
    assert joint_outcome(held, Cancellation(failed), holder, acquiring=True) is JointWrite.GUARD_REFUSED
    assert joint_outcome(Cancellation("TransactionConflict"), Cancellation(passed), holder, acquiring=True) is JointWrite.CONFLICT
    with pytest.raises(TransactionCancelledError):
        joint_outcome(Cancellation("ThrottlingError"), Cancellation(passed), holder, acquiring=True)
