"""The semaphore with holders, on moto DynamoDB: idempotent acquire and release, never over max."""

from __future__ import annotations

from pipeline.stores.semaphore import AcquireResult, ReleaseResult, Semaphore

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
