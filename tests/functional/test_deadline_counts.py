"""The on-time objective's counts on moto: each run counted once by a conditional write (at its end
by the tracker, or overdue by the reconciler, whichever is first), racing reconcilers included;
lost files found from the sparse unsettled-claims index and settled conditionally."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from monitors.reconcile.indicators import measure
from monitors.reconcile.loop import _active
from pipeline.deadline import EndedCount, Verdict, count_ended, ended_count
from pipeline.handlers import workflow_tracker
from pipeline.jobs import RunRef, format_timestamp
from pipeline.s3events import ObjectVersion
from pipeline.status import DeadlineCount, JobStatus
from pipeline.stores.claims import ClaimsStore, ClaimWrite, ObjectClaim
from pipeline.stores.run_index import RunIndex
from pipeline.stores.tracking import TrackingStore
from pipeline.tasks import record_verdict
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
    """Both passes observed the run active before either wrote: the conditional mark decides. (Run
    one after the other on the same observation: in-process moto does not make two threads' condition
    checks atomic, DynamoDB does, so threads would test moto, not the condition.)"""
    run = ingested(resources, "job/a.txt", NOW - timedelta(minutes=20))
    seen = active_runs(resources)
    results = [
        measure(seen, store, claims_store(resources), NOW, DEADLINE, count=True).overdue_files for _ in range(2)
    ]
    assert results == [1, 0]
    assert store.get_run(run).deadline_counted == DeadlineCount.OVERDUE  # type: ignore[union-attr]


def test_a_young_run_or_a_dry_run_is_not_counted_overdue(resources, store: TrackingStore) -> None:
    run = ingested(resources, "job/a.txt", NOW - timedelta(minutes=5))
    assert store.count_overdue(run, format_timestamp(NOW - DEADLINE)) is None  # younger than the cutoff
    old = ingested(resources, "old/a.txt", NOW - timedelta(minutes=30))
    assert measure(active_runs(resources), store, claims_store(resources), NOW, DEADLINE, count=False).overdue_files == 0
    assert store.get_run(old).deadline_counted == ""  # type: ignore[union-attr]


def verdict_of(run: RunRef, store: TrackingStore, at: datetime):
    """The workflow's verdict (PrepareComplete) on a one-file run, COMPLETE, written at `at`."""
    store.transition(run, JobStatus.DETECTING, at)
    event = {"job_id": run.job_id, "started_at": run.started_at, "redaction_mode": "blackout"}
    outcome = {
        "check": {"within_tolerance": True, "failed_share": 0.0},
        "failed_files": {},
        "redaction_results": {},
        "results_s3_prefix": "results/",
    }
    return record_verdict(store, event, outcome, at)


def test_the_verdict_counts_its_runs_files_on_time_or_late_in_the_same_write(resources, store: TrackingStore) -> None:
    quick = ingested(resources, "quick/a.txt", NOW)
    written = verdict_of(quick, store, NOW + timedelta(minutes=2))
    assert written is not None and ended_count(written, DEADLINE) == EndedCount(Verdict.ON_TIME, 1)
    slow = ingested(resources, "slow/a.txt", NOW)
    written = verdict_of(slow, store, NOW + timedelta(minutes=16))
    assert written is not None and ended_count(written, DEADLINE) == EndedCount(Verdict.LATE, 1)
    # Counted at its end: never overdue afterwards, and never counted again (a failure event, a retry).
    assert store.count_overdue(slow, format_timestamp(NOW + timedelta(days=1))) is None
    assert count_ended(store, slow, DEADLINE) is None


def test_a_late_verdict_after_overdue_counts_nothing(resources, store: TrackingStore) -> None:
    run = ingested(resources, "job/a.txt", NOW - timedelta(minutes=20))
    assert measure(active_runs(resources), store, claims_store(resources), NOW, DEADLINE, count=True).overdue_files == 1
    written = verdict_of(run, store, NOW)
    assert written is not None and written.status is JobStatus.COMPLETE
    assert ended_count(written, DEADLINE) is None


def test_the_tracker_counts_a_failed_run_once_and_a_success_never(resources, store: TrackingStore, lambda_context, capsys) -> None:
    failed = ingested(resources, "job/a.txt", NOW - timedelta(days=1))
    store.transition(failed, JobStatus.DETECTING, NOW)
    done = ingested(resources, "done/a.txt", NOW)
    store.transition(done, JobStatus.COMPLETE, NOW)  # a success the verdict did not count: not the tracker's
    capsys.readouterr()
    for run, status in ((failed, "FAILED"), (failed, "FAILED"), (done, "SUCCEEDED")):
        workflow_tracker.handler(status_event(resources, run, status, error="States.TaskFailed"), lambda_context)
    totals = emf_totals(capsys.readouterr().out)
    assert totals.get("FilesLate") == 1 and "FilesOnTime" not in totals  # queued a day ago: late, once


def test_a_failure_after_overdue_counts_nothing(resources, store: TrackingStore, lambda_context, capsys) -> None:
    run = ingested(resources, "job/a.txt", NOW - timedelta(minutes=20))
    assert measure(active_runs(resources), store, claims_store(resources), NOW, DEADLINE, count=True).overdue_files == 1
    capsys.readouterr()
    workflow_tracker.handler(status_event(resources, run, "TIMED_OUT"), lambda_context)
    totals = emf_totals(capsys.readouterr().out)
    assert store.get_run(run).status is JobStatus.FAILED  # type: ignore[union-attr]
    assert "FilesOnTime" not in totals and "FilesLate" not in totals


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
