"""The in-memory backends of the property tests (tests/property/memory.py) behave as the real
stores do on moto: the same scenario, run against both, gives the same results and leaves the same
state (counts, holders, their stamps, versions, run statuses). This pins the fake to the real."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pipeline.jobs import RunRef, format_timestamp
from pipeline.s3events import ObjectVersion
from pipeline.status import JobStatus
from pipeline.stores.audit import AuditStore, LastRun
from pipeline.stores.claims import ClaimsStore, ClaimWrite, ObjectClaim
from pipeline.stores.run_index import RunIndex
from pipeline.stores.semaphore import AcquireResult, JointWrite, ReleaseResult, Semaphore
from pipeline.stores.tracking import TrackingStore
from tests.property.memory import (
    MemoryAudit,
    MemoryClaims,
    MemoryRunIndex,
    MemorySemaphore,
    MemoryTrackingStore,
)

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
T = [format_timestamp(NOW + timedelta(seconds=s)) for s in range(10)]
RUN = RunRef("claims/", format_timestamp(NOW))
OTHER = RunRef("invoices/", format_timestamp(NOW))


def semaphore_scenario(sem: Any) -> list[Any]:
    """Acquire to the max, release_observed with a stale and the right stamp, set_count with a
    stale and the current version, releases with a drifted count (the floor)."""
    seen: list[Any] = [sem.read()]

    def step(outcome: Any) -> None:
        seen.append((outcome, sem.read()))

    step(sem.set_count(0, 3))  # no item yet: a stale version
    step(sem.acquire("a", T[1], 2))
    step(sem.acquire("a", T[2], 2))  # held: nothing changes, not even the stamp
    step(sem.acquire("b", T[2], 2))
    step(sem.acquire("c", T[3], 2))  # at capacity
    step(sem.release_observed("a", T[9]))  # a stamp it never had
    step(sem.release_observed("a", T[1]))
    step(sem.release_observed("a", T[1]))  # released already
    stale = sem.read().version - 1
    step(sem.set_count(5, stale))
    step(sem.set_count(5, sem.read().version))  # drifted up
    step(sem.release("b"))  # 5 -> 4, the holder gone
    step(sem.release("b"))
    step(sem.acquire("d", T[4], 2))  # 4 >= max with no holder (the stall): at capacity...
    step(sem.set_count(0, sem.read().version))  # ...until the count is repaired
    step(sem.acquire("d", T[4], 2))
    step(sem.set_count(0, sem.read().version))  # drifted to 0 with a holder
    step(sem.release_observed("d", T[4]))  # at the floor: the holder goes, the count stays 0
    step(sem.acquire("e", T[5], 2))
    step(sem.set_count(0, sem.read().version))
    step(sem.release("e"))  # the floor again, by holder
    step(sem.set_count(0, 0))  # version 0 expected, the item has a version: refused
    return seen


def below_scenario(sem: Any, store: Any) -> list[Any]:
    """A count set below its holders (-3 at max 2): admission is bounded by the holders as well."""
    seen: list[Any] = []

    def step(outcome: Any) -> None:
        seen.append((outcome, sem.read()))

    at = [NOW + timedelta(seconds=s) for s in range(10)]
    store.create_run(RUN, ["claims/a.txt"], "in", at[0])
    step(sem.acquire("a", T[1], 2))
    step(sem.acquire("b", T[1], 2))
    step(sem.set_count(-3, sem.read().version))
    step(sem.acquire("c", T[2], 2))  # two holders: at capacity, whatever the count
    step(sem.admit("c", T[2], 2, store.admission_item(RUN, at[2], "t1", expected_status=JobStatus.QUEUED)))
    step(sem.while_full("c", 2, store.lease_item(RUN, at[3])))  # still full for it
    step(sem.release("a"))  # at the floor: the holder goes, the count stays
    step(sem.admit("c", T[3], 2, store.admission_item(RUN, at[3], "t2", expected_status=JobStatus.QUEUED)))
    step(sem.acquire("d", T[4], 2))
    return seen


def test_a_count_below_its_holders_gives_the_same_results_and_states(real) -> None:
    expected, got = below_scenario(*real), below_scenario(MemorySemaphore(), MemoryTrackingStore())
    assert got == expected
    assert [outcome for outcome, _ in expected][3:] == [
        AcquireResult.AT_CAPACITY,
        JointWrite.AT_CAPACITY,
        JointWrite.DONE,
        ReleaseResult.RELEASED,
        JointWrite.DONE,
        AcquireResult.AT_CAPACITY,
    ]
    assert expected[-1][1].active_count == -2 and set(expected[-1][1].holders) == {"b", "c"}


def joint_scenario(sem: Any, store: Any) -> list[Any]:
    """admit / adopt / release_if with the run's guards, as the router uses them."""
    seen: list[Any] = []

    def step(outcome: Any) -> None:
        record = store.get_run(RUN)
        seen.append((outcome, sem.read(), (record.status, record.updated_at, record.execution_arn)))

    at = [NOW + timedelta(seconds=s) for s in range(10)]
    store.create_run(RUN, ["claims/a.txt"], "in", at[0])
    store.create_run(OTHER, ["invoices/a.txt"], "in", at[0])
    step(sem.admit("n", T[1], 1, store.admission_item(RUN, at[1], "tok1", expected_status=JobStatus.QUEUED)))
    step(sem.admit("n", T[2], 1, store.admission_item(RUN, at[2], "tok2", expected_status=JobStatus.QUEUED)))  # run moved
    step(sem.admit("m", T[2], 1, store.admission_item(OTHER, at[2], "tok3", expected_status=JobStatus.QUEUED)))  # full
    step(sem.admit("n", T[3], 1, store.admission_item(RUN, at[3], "tok2", expected_status=JobStatus.IN_PROGRESS)))  # held
    step(sem.adopt("n", T[3], store.admission_item(RUN, at[3], "tok2", expected_status=JobStatus.IN_PROGRESS)))
    step(sem.adopt("x", T[3], store.admission_item(RUN, at[4], "tok4", expected_status=JobStatus.IN_PROGRESS)))  # not held
    step(sem.release_if("n", store.admitted_by_item(RUN, "tok1")))  # fenced: tok2 carried on since
    step(sem.set_count(0, sem.read().version))  # drifted to 0 with the holder
    step(sem.release_if("n", store.admitted_by_item(RUN, "tok2")))  # the floor
    step(sem.release_if("n", store.admitted_by_item(RUN, "tok2")))  # not held any more
    step(sem.admit("n", T[5], 1, store.admission_item(RUN, at[5], "tok5", expected_status=JobStatus.IN_PROGRESS)))
    store.record_execution(RUN, "arn:aws:states:us-east-1:123456789012:execution:sm:n", [])
    step(sem.release_if("n", store.admitted_by_item(RUN, "tok5")))  # an ARN is recorded: refused
    step(sem.adopt("n", T[6], store.admission_item(RUN, at[6], "tok6", expected_status=JobStatus.IN_PROGRESS)))
    stale = store.get_run(RUN).updated_at
    step(store.transition(RUN, JobStatus.DETECTING, at[7]) is not None)
    step(store.transition(RUN, JobStatus.FAILED, at[8], expected_status=JobStatus.DETECTING, expected_updated_at=stale))
    current = store.get_run(RUN).updated_at
    step(store.transition(RUN, JobStatus.FAILED, at[8], expected_status=JobStatus.DETECTING, expected_updated_at=current) is not None)
    step(store.transition(RUN, JobStatus.DETECTING, at[9]))  # terminal stays terminal
    return seen


def announcement_scenario(store: Any) -> list[Any]:
    """The announce deadline as the router, ingest and the reconciler move it, and the deletion of
    a run no claim names, each with a stale and a current expectation."""
    seen: list[Any] = []
    at = [NOW + timedelta(seconds=s) for s in range(10)]

    def step(outcome: Any, run: RunRef = RUN) -> None:
        record = store.get_run(run)
        seen.append((outcome, record and (record.status, record.announce_deadline, record.announcements)))

    store.create_run(RUN, ["claims/a.txt"], "in", at[0], announce_delay=30)
    store.create_run(OTHER, ["invoices/a.txt"], "in", at[0])
    step(None)
    step(store.extend_announcement(RUN, at[9]))
    step(store.record_reannouncement(RUN, at[2], expected_status=JobStatus.QUEUED, expected_deadline=T[0]))  # stale
    step(store.record_reannouncement(RUN, at[2], expected_status=JobStatus.QUEUED, expected_deadline=T[9]))
    step(store.record_reannouncement(RUN, at[3], expected_status=JobStatus.IN_PROGRESS, expected_deadline=T[2]))
    step(store.transition(RUN, JobStatus.IN_PROGRESS, at[4]) is not None)
    step(store.extend_announcement(RUN, at[5]))  # IN_PROGRESS without an execution: still announced
    store.record_execution(RUN, "arn:aws:states:us-east-1:123456789012:execution:sm:n", [])
    step(store.extend_announcement(RUN, at[6]))  # started: nothing to announce
    step(store.delete_unclaimed_run(OTHER, expected_updated_at=T[5]), OTHER)  # changed since observed
    step(store.delete_unclaimed_run(OTHER, expected_updated_at=T[0]), OTHER)
    step(store.delete_unclaimed_run(RUN, expected_updated_at=store.get_run(RUN).updated_at))  # not QUEUED
    return seen


def test_the_announcement_writes_give_the_same_results_and_states(real) -> None:
    assert announcement_scenario(real[1]) == announcement_scenario(MemoryTrackingStore())


@pytest.fixture
def real(resources) -> tuple[Semaphore, TrackingStore]:
    ddb = resources.client("dynamodb")
    return Semaphore(resources.coordination_table, ddb), TrackingStore(resources.tracking_table, ddb)


def test_the_semaphore_scenario_gives_the_same_results_and_states(real) -> None:
    expected, got = semaphore_scenario(real[0]), semaphore_scenario(MemorySemaphore())
    assert got == expected
    assert expected[-1][1].active_count == 0 and expected[-1][1].holders == {}  # (the scenario ran through)


def test_the_joint_writes_give_the_same_results_and_states(real) -> None:
    expected, got = joint_scenario(*real), joint_scenario(MemorySemaphore(), MemoryTrackingStore())
    assert got == expected


def waiting_scenario(sem: Any, store: Any) -> list[Any]:
    """What the router reads and writes around a capacity wait: run and semaphore in one read, the
    "still full?" lease write, and the admission conditional on the files read."""
    seen: list[Any] = []
    at = [NOW + timedelta(seconds=s) for s in range(10)]

    def step(outcome: Any) -> None:
        record, slots = store.get_run_and_slots(RUN, sem)
        seen.append((outcome, slots, record and (record.status, record.announce_deadline, record.files)))

    step(None)  # no run, no semaphore item
    store.create_run(RUN, ["claims/a.txt"], "in", at[0])
    step(sem.while_full("n", 1, store.lease_item(RUN, at[5])))  # no semaphore item: a slot is free
    sem.acquire("busy", T[1], 1)
    step(sem.while_full("n", 1, store.lease_item(RUN, at[5])))  # full: the lease renewed
    step(sem.while_full("n", 2, store.lease_item(RUN, at[6])))  # a second slot: free
    step(sem.release("busy"))
    step(sem.admit("n", T[2], 1, store.admission_item(RUN, at[2], "t1", expected_status=JobStatus.QUEUED, expected_files=2)))
    step(sem.admit("n", T[2], 1, store.admission_item(RUN, at[2], "t1", expected_status=JobStatus.QUEUED, expected_files=1)))
    step(sem.while_full("n", 1, store.lease_item(RUN, at[7])))  # its own slot: not full for it
    step(sem.while_full("x", 1, store.lease_item(RUN, at[7])))  # full for another, the run IN_PROGRESS
    store.record_execution(RUN, "arn:aws:states:us-east-1:123456789012:execution:sm:n", [])
    step(sem.while_full("x", 1, store.lease_item(RUN, at[8])))  # started: the lease is refused
    step(sem.while_full("x", 1, store.lease_item(OTHER, at[8])))  # no such run: refused
    return seen


def test_the_capacity_wait_reads_and_writes_give_the_same_results_and_states(real) -> None:
    expected, got = waiting_scenario(*real), waiting_scenario(MemorySemaphore(), MemoryTrackingStore())
    assert got == expected
    assert [outcome for outcome, *_ in expected][1:5] == [
        JointWrite.SLOT_FREE,
        JointWrite.DONE,
        JointWrite.SLOT_FREE,
        ReleaseResult.RELEASED,
    ]


def claims_scenario(store: Any, claims: Any, runs: Any) -> list[Any]:
    """Ingest's transactions (a run opened or joined together with the object's claim) with every
    refusal, the reads ingest and the reconciler make of claims and heads, and the index reads."""
    seen: list[Any] = []
    at = [NOW + timedelta(seconds=s) for s in range(10)]
    later, latest = RunRef("claims/", T[5]), RunRef("claims/", T[8])
    a, b, c = (ObjectClaim("in", f"claims/{name}.txt", RUN) for name in "abc")

    def step(outcome: Any) -> None:
        seen.append((outcome, claims.ingest_view("in", a.key, "claims/"), store.pending_run("claims/")))

    step(claims.open_run_with_claim(a, "in", at[0], announce_delay=30))
    step(claims.open_run_with_claim(a, "in", at[0]))  # the object is claimed already
    step(claims.join_run_with_claim(b, at[1], max_files=2))
    step(claims.join_run_with_claim(c, at[2], max_files=2))  # full
    step(claims.open_run_with_claim(ObjectClaim("in", c.key, later), "in", at[2]))  # the job has a pending run
    store.clear_pending(RUN)
    step(claims.open_run_with_claim(ObjectClaim("in", c.key, RunRef("claims/", T[0])), "in", at[3]))  # not after the latest
    step(claims.join_run_with_claim(c, at[3]))  # the run left the pending pointer, but is still QUEUED: joined
    step(claims.open_run_with_claim(ObjectClaim("in", "claims/d.txt", later), "in", at[4]))
    step(claims.join_run_with_claim(a.succeeded_by(later, ObjectVersion("2", "v2")), at[5]))  # a newer version
    step(claims.join_run_with_claim(a.succeeded_by(later, ObjectVersion("2", "v2")), at[5]))  # its revision moved
    store.clear_pending(later)
    store.create_run(latest, [], "in", at[6], lead=False)
    step(claims.open_run_with_claim(ObjectClaim("in", "claims/e.txt", latest), "in", at[6]))  # the run exists
    step(store.transition(later, JobStatus.IN_PROGRESS, at[7]) is not None)
    step(claims.join_run_with_claim(ObjectClaim("in", "claims/f.txt", later), at[7]))  # no longer QUEUED
    seen.append(claims.claimed_runs("in", ["claims/a.txt", "claims/b.txt", "claims/c.txt", "claims/d.txt", "claims/z.txt"]))
    seen.append([claims.object_claim("in", key) for key in ("claims/a.txt", "claims/z.txt")])
    seen.append([store.get_run(run) for run in (RUN, later, latest)])
    seen.append((store.runs_of("claims/", 2), store.latest_runs(["claims/", "none/"])))
    seen.append((runs.newest(JobStatus.QUEUED, 5), runs.count_active(), list(runs.active_runs(JobStatus.QUEUED, T[3]))))
    seen.append((runs.ended_since(JobStatus.QUEUED, T[0], 1), runs.ended_since(JobStatus.QUEUED, T[0], 3)))
    return seen


def test_the_claim_transactions_and_index_reads_give_the_same_results_and_states(resources) -> None:
    ddb = resources.client("dynamodb")
    claims = ClaimsStore(resources.tracking_table, resources.coordination_table, ddb)
    expected = claims_scenario(TrackingStore(resources.tracking_table, ddb), claims, RunIndex(resources.tracking_table, ddb))
    memory = MemoryTrackingStore()
    got = claims_scenario(memory, MemoryClaims(memory), MemoryRunIndex(memory))
    assert got == expected
    outcomes = [entry[0] for entry in expected[:13]]
    assert set(ClaimWrite) - {ClaimWrite.CONFLICT} <= set(outcomes)  # (every refusal was met)


def audit_scenario(audit: Any) -> list[Any]:
    """Repairs recorded, the last run written over, and the trail read back by window and limit."""
    seen: list[Any] = [audit.last_run(), audit.history(NOW - timedelta(hours=1)).records]
    for minutes, target in ((50, "old"), (20, "a"), (10, "b"), (5, "c")):
        at = NOW - timedelta(minutes=minutes)
        audit.record(action="set_count", target=target, reason="drift", before={"version": 3}, after={"n": 1.5}, by="me", at=at)
    for repairs in (1, 2):
        audit.record_last_run(LastRun(T[repairs], "me", [{"kind": "CounterDrift", "target": "x"}], 1, repairs, 0, 0))
    window, capped = audit.history(NOW - timedelta(minutes=30)), audit.history(NOW - timedelta(minutes=30), limit=2)
    return [*seen, audit.last_run(), window.records, window.truncated, capped.records, capped.truncated, audit.history(NOW, limit=0)]


def test_the_audit_trail_gives_the_same_records_back(resources) -> None:
    expected = audit_scenario(AuditStore(resources.coordination_table, resources.client("dynamodb")))
    assert audit_scenario(MemoryAudit()) == expected
    assert [r.target for r in expected[3]] == ["c", "b", "a"] and expected[6]  # (the scenario ran through)


# -- a release is two calls: what happens when a write lands between them ---------------------------


class _WriteBetween:
    """A DynamoDB client that makes `write()` just before its n-th update_item call (1-based)."""

    def __init__(self, client: Any, n: int, write: Any) -> None:
        self._client, self._n, self._write, self._calls = client, n, write, 0

    def update_item(self, **request: Any) -> Any:
        self._calls += 1
        if self._calls == self._n:
            self._write()
        return self._client.update_item(**request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def race_release_with_acquire(real: Semaphore | None) -> tuple[Any, Any]:
    """release("a") while "a" is not held; an acquire of "a" lands between its two calls (a
    duplicated status event's tracker, and a router admitting the name again)."""
    if real is not None:
        other = real
        racing = Semaphore(real._table, _WriteBetween(real._client, 2, lambda: other.acquire("a", T[1], 2)))
        return racing.release("a"), real.read()
    memory = MemorySemaphore()
    memory.hook = lambda label: memory.acquire("a", T[1], 2) if label == "semaphore.release a (floor)" else None
    return memory.release("a"), memory.state()


def test_the_fake_has_the_real_release_s_two_calls(real) -> None:
    assert race_release_with_acquire(None) == race_release_with_acquire(real[0])


def test_a_release_racing_an_acquire_leaves_the_count_equal_to_its_holders(real) -> None:
    _, state = race_release_with_acquire(real[0])
    assert state.active_count == len(state.holders)
