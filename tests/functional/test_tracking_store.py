"""The tracking store on moto: forward-only status writes enforced by DynamoDB, batched reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pipeline.jobs import RunRef, format_timestamp
from pipeline.status import JobStatus
from pipeline.stores.tracking import PendingAdd, TrackingStore

NOW = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)


@pytest.fixture
def store(resources) -> TrackingStore:
    return TrackingStore(resources.tracking_table, resources.client("dynamodb"))


def new_run(store: TrackingStore, job_id: str = "claims/", at: datetime = NOW) -> RunRef:
    run = RunRef(job_id, format_timestamp(at))
    assert store.create_run(run, ["claims/a.txt"], "in", at)
    return run


def test_a_run_is_created_once_queued_and_active(store: TrackingStore) -> None:
    run = new_run(store)
    assert not store.create_run(run, ["claims/b.txt"], "in", NOW)
    record = store.get_run(run)
    assert record is not None
    assert record.status is JobStatus.QUEUED
    assert record.files == ("claims/a.txt",)
    assert [r.run for r in store.active_runs(JobStatus.QUEUED)] == [run]


def test_a_late_status_write_that_would_go_backwards_is_rejected(store: TrackingStore) -> None:
    run = new_run(store)
    assert store.transition(run, JobStatus.REDACTING, NOW) is not None
    assert store.transition(run, JobStatus.DETECTING, NOW) is None
    record = store.get_run(run)
    assert record is not None and record.status is JobStatus.REDACTING


def test_a_terminal_run_leaves_the_active_index_and_never_changes_again(store: TrackingStore) -> None:
    run = new_run(store)
    assert store.transition(run, JobStatus.COMPLETE, NOW) is not None
    assert store.transition(run, JobStatus.FAILED, NOW) is None
    assert list(store.active_runs()) == []


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


def test_files_join_a_pending_run_until_it_is_frozen(store: TrackingStore) -> None:
    run = new_run(store)
    assert store.add_file_to_pending(run, "claims/b.txt", NOW) is PendingAdd.ADDED
    assert store.add_file_to_pending(run, "claims/b.txt", NOW) is PendingAdd.ALREADY_PRESENT
    store.transition(run, JobStatus.IN_PROGRESS, NOW)
    assert store.add_file_to_pending(run, "claims/c.txt", NOW) is PendingAdd.CLOSED
    record = store.get_run(run)
    assert record is not None and record.files == ("claims/a.txt", "claims/b.txt")


def test_runs_of_a_job_are_listed_newest_first_without_the_head(store: TrackingStore) -> None:
    first = new_run(store)
    second = new_run(store, at=NOW + timedelta(minutes=1))
    assert [r.run for r in store.runs_of("claims/")] == [second, first]


def test_runs_are_listed_and_counted_by_status_without_a_scan(store: TrackingStore) -> None:
    done = new_run(store, "done/")
    new_run(store, "waiting/")
    store.transition(done, JobStatus.COMPLETE, NOW)
    assert [r.run for r in store.runs_with_status(JobStatus.COMPLETE)] == [done]
    counts = store.count_by_status()
    assert counts[JobStatus.COMPLETE] == 1 and counts[JobStatus.QUEUED] == 1 and counts[JobStatus.FAILED] == 0
