"""The on-time objective's counts on moto: each run counted once by a conditional write (at its end
by the tracker, or overdue by the reconciler, whichever is first), racing reconcilers included;
lost files found from the sparse unsettled-claims index and settled conditionally."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from monitors.reconcile.indicators import measure
from monitors.reconcile.loop import _active
from pipeline.deadline import count_ended
from pipeline.handlers import workflow_tracker
from pipeline.jobs import RunRef, format_timestamp
from pipeline.s3events import ObjectVersion
from pipeline.status import DeadlineCount, JobStatus
from pipeline.stores.claims import ClaimsStore, ClaimWrite, ObjectClaim
from pipeline.stores.run_index import RunIndex
from pipeline.stores.tracking import TrackingStore
from tests.conftest import emf_totals
from tests.functional.test_tracker_handler import status_event

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
DEADLINE = timedelta(minutes=15)


def claims_store(resources) -> ClaimsStore:
    return ClaimsStore(resources.tracking_table, resources.coordination_table, resources.client("dynamodb"))


def ingested(resources, key: str, at: datetime, revision: int = 1) -> RunRef:
    """A file accepted as ingest does: its run opened together with its claim."""
    run = RunRef(key.split("/")[0] + "/", format_timestamp(at))
    claim = ObjectClaim(resources.input_bucket, key, run, ObjectVersion(f"{revision:016x}", ""), revision)
    assert claims_store(resources).open_run_with_claim(claim, resources.input_bucket, at) is ClaimWrite.WRITTEN
    return run


def active_runs(resources):
    return [_active(record) for record in RunIndex(resources.tracking_table, resources.client("dynamodb")).active_runs()]


def test_two_racing_reconcilers_count_an_overdue_run_once(resources, store: TrackingStore) -> None:
    run = ingested(resources, "job/a.txt", NOW - timedelta(minutes=20))
    seen = active_runs(resources)
    results = []

    def one_pass() -> None:
        results.append(measure(seen, store, claims_store(resources), NOW, DEADLINE, count=True).overdue_files)

    threads = [threading.Thread(target=one_pass) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [0, 1]
    assert store.get_run(run).deadline_counted == DeadlineCount.OVERDUE  # type: ignore[union-attr]


def test_a_young_run_or_a_dry_run_is_not_counted_overdue(resources, store: TrackingStore) -> None:
    run = ingested(resources, "job/a.txt", NOW - timedelta(minutes=5))
    assert store.count_overdue(run, format_timestamp(NOW - DEADLINE)) is None  # younger than the cutoff
    old = ingested(resources, "old/a.txt", NOW - timedelta(minutes=30))
    assert measure(active_runs(resources), store, claims_store(resources), NOW, DEADLINE, count=False).overdue_files == 0
    assert store.get_run(old).deadline_counted == ""  # type: ignore[union-attr]


def test_a_late_completion_after_overdue_counts_nothing(resources, store: TrackingStore, lambda_context, capsys) -> None:
    run = ingested(resources, "job/a.txt", NOW - timedelta(minutes=20))
    assert measure(active_runs(resources), store, claims_store(resources), NOW, DEADLINE, count=True).overdue_files == 1
    assert store.transition(run, JobStatus.COMPLETE, NOW) is not None
    capsys.readouterr()
    workflow_tracker.handler(status_event(resources, run, "SUCCEEDED"), lambda_context)
    totals = emf_totals(capsys.readouterr().out)
    assert "FilesOnTime" not in totals and "FilesLate" not in totals


def test_the_tracker_counts_a_run_at_its_end_once_on_time_or_late(resources, store: TrackingStore, lambda_context, capsys) -> None:
    on_time = ingested(resources, "quick/a.txt", NOW)
    store.transition(on_time, JobStatus.COMPLETE, NOW + timedelta(minutes=2))
    late = ingested(resources, "slow/a.txt", NOW)
    store.transition(late, JobStatus.COMPLETE, NOW + timedelta(minutes=16))
    capsys.readouterr()
    for run in (on_time, late, late):  # the last: a repeated status event
        workflow_tracker.handler(status_event(resources, run, "SUCCEEDED"), lambda_context)
    totals = emf_totals(capsys.readouterr().out)
    assert (totals.get("FilesOnTime"), totals.get("FilesLate")) == (1, 1)
    # Counted at its end: never overdue afterwards, and never counted again.
    assert store.count_overdue(late, format_timestamp(NOW + timedelta(days=1))) is None
    assert count_ended(store, late, DEADLINE) is None


def test_a_failed_execution_counts_its_files_from_the_failure_the_tracker_writes(resources, store: TrackingStore, lambda_context, capsys) -> None:
    run = ingested(resources, "job/a.txt", NOW - timedelta(days=1))
    store.transition(run, JobStatus.DETECTING, NOW)
    capsys.readouterr()
    workflow_tracker.handler(status_event(resources, run, "FAILED", error="States.TaskFailed"), lambda_context)
    assert emf_totals(capsys.readouterr().out).get("FilesLate") == 1  # queued a day ago: late


def test_a_file_removed_from_its_run_is_lost_until_uploaded_again(resources, store: TrackingStore) -> None:
    claims = claims_store(resources)
    run = ingested(resources, "job/a.txt", NOW - timedelta(minutes=20))
    done = ingested(resources, "done/a.txt", NOW - timedelta(minutes=20))
    store.transition(done, JobStatus.COMPLETE, NOW - timedelta(minutes=10))
    # Removed from its run by hand.
    resources.client("dynamodb").update_item(
        TableName=resources.tracking_table,
        Key={"job_id": {"S": run.job_id}, "started_at": {"S": run.started_at}},
        UpdateExpression="DELETE files :k",
        ExpressionAttributeValues={":k": {"SS": ["job/a.txt"]}},
    )
    dry = measure([], store, claims, NOW, DEADLINE, count=False)
    assert (dry.lost_files, dry.settled, dry.claims_read) == (1, 0, 2)
    found = measure([], store, claims, NOW, DEADLINE, count=True)
    assert (found.lost_files, found.settled) == (1, 1)  # done/a.txt had its outcome: out of the index
    assert measure([], store, claims, NOW, DEADLINE, count=True).claims_read == 1
    # Uploaded again: a newer version joins a new run; the stale claim can no longer be settled.
    [stale] = claims.unsettled_claims(format_timestamp(NOW), 10)
    store.transition(run, JobStatus.FAILED, NOW)  # frees the job's pending run for the new upload
    again = RunRef(run.job_id, format_timestamp(NOW))
    newer = ObjectClaim(resources.input_bucket, "job/a.txt", again, ObjectVersion("2".zfill(16), ""), 2)
    store.clear_pending(run)
    assert claims.open_run_with_claim(newer, resources.input_bucket, NOW) is ClaimWrite.WRITTEN
    assert measure([], store, claims, NOW + timedelta(minutes=1), DEADLINE, count=True).lost_files == 0
    assert not claims.settle(stale)
