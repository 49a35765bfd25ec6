"""The tracking store on moto: forward-only status writes enforced by DynamoDB, batched reads,
and ingest's transactions that put a file into a run together with its object claim."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pipeline.jobs import RunRef, format_timestamp
from pipeline.s3events import ObjectVersion
from pipeline.status import JobStatus
from pipeline.stores._dynamodb import TransactionCancelledError
from pipeline.stores.claims import ClaimsStore, ClaimWrite, IngestView, ObjectClaim, cancellation_outcome
from pipeline.stores.run_index import RunIndex
from pipeline.stores.tracking import TrackingStore

NOW = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)


def new_run(store: TrackingStore, job_id: str = "claims/", at: datetime = NOW) -> RunRef:
    run = RunRef(job_id, format_timestamp(at))
    assert store.create_run(run, ["claims/a.txt"], "in", at)
    return run


@pytest.fixture
def runs(resources) -> RunIndex:
    return RunIndex(resources.tracking_table, resources.client("dynamodb"))


def test_a_run_is_created_once_queued_and_active(store: TrackingStore, runs: RunIndex) -> None:
    run = new_run(store)
    assert not store.create_run(run, ["claims/b.txt"], "in", NOW)
    record = store.get_run(run)
    assert record is not None
    assert record.status is JobStatus.QUEUED
    assert record.files == ("claims/a.txt",)
    assert [r.run for r in runs.active_runs(JobStatus.QUEUED)] == [run]


def test_a_late_status_write_that_would_go_backwards_is_rejected(store: TrackingStore) -> None:
    run = new_run(store)
    assert store.transition(run, JobStatus.REDACTING, NOW) is not None
    assert store.transition(run, JobStatus.DETECTING, NOW) is None
    record = store.get_run(run)
    assert record is not None and record.status is JobStatus.REDACTING


def test_a_terminal_run_leaves_the_active_index_and_never_changes_again(store: TrackingStore, runs: RunIndex) -> None:
    run = new_run(store)
    assert store.transition(run, JobStatus.COMPLETE, NOW) is not None
    assert store.transition(run, JobStatus.FAILED, NOW) is None
    assert list(runs.active_runs()) == []


def test_transition_can_require_exactly_what_was_observed(store: TrackingStore) -> None:
    run = new_run(store)
    record = store.get_run(run)
    assert record is not None
    store.transition(run, JobStatus.IN_PROGRESS, NOW + timedelta(seconds=1))
    moved_on = store.transition(
        run, JobStatus.FAILED, NOW, expected_status=JobStatus.QUEUED, expected_updated_at=record.updated_at
    )
    assert moved_on is None


def test_latest_runs_reads_many_jobs_in_batches(store: TrackingStore) -> None:
    for index in range(120):  # more than one BatchGetItem page
        new_run(store, f"job{index:03d}/")
    later = new_run(store, "job000/", NOW + timedelta(minutes=5))
    latest = store.latest_runs([f"job{index:03d}/" for index in range(120)] + ["never-run/"])
    assert len(latest) == 120
    assert latest["job000/"].run == later


V1 = ObjectVersion("0055AED6DCD90281E5", "v1")
V2 = ObjectVersion("0055AED6DCD90281E6", "v2")


def claim_of(run: RunRef, key: str = "claims/a.txt", version: ObjectVersion = V1) -> ObjectClaim:
    return ObjectClaim("in", key, run, version)


def test_opening_a_run_writes_run_pending_pointer_and_claim_together(store: TrackingStore, claims: ClaimsStore) -> None:
    run = RunRef("claims/", format_timestamp(NOW))
    assert claims.open_run_with_claim(claim_of(run), "in", NOW) is ClaimWrite.WRITTEN
    record = store.get_run(run)
    assert record is not None and record.status is JobStatus.QUEUED and record.files == ("claims/a.txt",)
    assert store.pending_run("claims/") == run
    assert claims.object_claim("in", "claims/a.txt") == claim_of(run)
    assert store.runs_of("claims/") == [record]  # the claim lives elsewhere: no stray items


def test_a_losing_open_writes_nothing_and_says_why(store: TrackingStore, claims: ClaimsStore) -> None:
    first = RunRef("claims/", format_timestamp(NOW))
    claims.open_run_with_claim(claim_of(first), "in", NOW)
    second = RunRef("claims/", format_timestamp(NOW + timedelta(seconds=1)))
    # the same object again: the claim changed first (it wins over the pending pointer)
    assert claims.open_run_with_claim(claim_of(second), "in", NOW) is ClaimWrite.CLAIM_MOVED
    # another object: the job has a pending run already
    assert claims.open_run_with_claim(claim_of(second, "claims/b.txt"), "in", NOW) is ClaimWrite.PENDING_MOVED
    # no pending run, but the job's latest run does not start before the candidate: read again
    store.clear_pending(first)
    assert claims.open_run_with_claim(claim_of(first, "claims/c.txt"), "in", NOW) is ClaimWrite.PENDING_MOVED
    # a run with the candidate's start time exists (a batch run that does not lead the head)
    store.create_run(second, ["claims/z.txt"], "in", NOW, lead=False)
    assert claims.open_run_with_claim(claim_of(second, "claims/d.txt"), "in", NOW) is ClaimWrite.RUN_EXISTS
    assert store.pending_run("claims/") is None and claims.ingest_view("in", "claims/d.txt", "claims/").latest == first.started_at
    for key in ("claims/b.txt", "claims/c.txt", "claims/d.txt"):
        assert claims.object_claim("in", key) is None


def test_an_open_run_leads_the_job_and_one_read_shows_claim_and_head(store: TrackingStore, claims: ClaimsStore) -> None:
    run = RunRef("claims/", format_timestamp(NOW))
    assert claims.ingest_view("in", "claims/a.txt", "claims/") == IngestView(None, None, "")
    assert claims.open_run_with_claim(claim_of(run), "in", NOW) is ClaimWrite.WRITTEN
    assert claims.ingest_view("in", "claims/a.txt", "claims/") == IngestView(claim_of(run), run, run.started_at)
    assert store.latest_runs(["claims/"])["claims/"].run == run  # the batch trigger's view: no second write


def test_files_join_a_pending_run_with_their_claims_until_it_is_frozen(store: TrackingStore, claims: ClaimsStore) -> None:
    run = RunRef("claims/", format_timestamp(NOW))
    claims.open_run_with_claim(claim_of(run), "in", NOW)
    assert claims.join_run_with_claim(claim_of(run, "claims/b.txt"), NOW) is ClaimWrite.WRITTEN
    newer = claims.object_claim("in", "claims/a.txt").succeeded_by(run, V2)  # type: ignore[union-attr]
    assert claims.join_run_with_claim(newer, NOW) is ClaimWrite.WRITTEN
    assert claims.object_claim("in", "claims/a.txt") == newer and newer.revision == 2
    assert claims.join_run_with_claim(claim_of(run, "claims/b.txt"), NOW) is ClaimWrite.CLAIM_MOVED  # revision 1 again
    store.transition(run, JobStatus.IN_PROGRESS, NOW)
    assert claims.join_run_with_claim(claim_of(run, "claims/c.txt"), NOW) is ClaimWrite.RUN_CLOSED
    assert claims.join_run_with_claim(claim_of(RunRef("claims/", "1999"), "claims/d.txt"), NOW) is ClaimWrite.RUN_CLOSED
    record = store.get_run(run)
    assert record is not None and record.files == ("claims/a.txt", "claims/b.txt")
    assert claims.object_claim("in", "claims/c.txt") is None


def test_cancellation_reasons_map_to_what_the_caller_does_next() -> None:
    roles = ["pending_run", "claim"]
    assert cancellation_outcome(["ConditionalCheckFailed", "ConditionalCheckFailed"], roles) is ClaimWrite.CLAIM_MOVED
    assert cancellation_outcome(["ConditionalCheckFailed", "None"], roles) is ClaimWrite.RUN_CLOSED
    assert cancellation_outcome(["TransactionConflict", "None"], roles) is ClaimWrite.CONFLICT
    with pytest.raises(TransactionCancelledError, match="ThrottlingError"):
        cancellation_outcome(["ThrottlingError", "None"], roles)
    with pytest.raises(TransactionCancelledError, match="ValidationError"):
        cancellation_outcome(["None", "ValidationError"], roles)
    with pytest.raises(TransactionCancelledError, match="no reason given"):
        cancellation_outcome(["None", "None"], roles)


def test_runs_of_a_job_are_listed_newest_first_without_the_head(store: TrackingStore) -> None:
    first = new_run(store)
    second = new_run(store, at=NOW + timedelta(minutes=1))
    assert [r.run for r in store.runs_of("claims/")] == [second, first]


def test_runs_are_listed_by_status_and_active_runs_counted_on_the_indexes(store: TrackingStore, runs: RunIndex) -> None:
    done, later = new_run(store, "done/"), new_run(store, "later/")
    new_run(store, "waiting/")
    store.transition(done, JobStatus.COMPLETE, NOW)
    store.transition(later, JobStatus.COMPLETE, NOW + timedelta(minutes=1))
    assert [r.run for r in runs.newest(JobStatus.COMPLETE, 5)] == [later, done]
    assert [r.run for r in runs.newest(JobStatus.COMPLETE, 1)] == [later]
    counts = runs.count_active()
    assert counts[JobStatus.QUEUED] == 1 and sum(counts.values()) == 1
    assert runs.ended_since(JobStatus.COMPLETE, format_timestamp(NOW), cap=1) == ([format_timestamp(NOW + timedelta(minutes=1))], True)
    assert runs.ended_since(JobStatus.FAILED, format_timestamp(NOW), cap=1) == ([], False)
    assert runs.last_ended_after(format_timestamp(NOW - timedelta(minutes=1))) == format_timestamp(NOW + timedelta(minutes=1))
    assert runs.last_ended_after(format_timestamp(NOW + timedelta(minutes=1))) is None
