"""Batch trigger on moto: each decision acted on, stale runs reclaimed in the safe order."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from pipeline.handlers import batch_trigger
from pipeline.jobs import JobMessage, RunRef, format_timestamp, utc_now
from pipeline.status import JobStatus
from pipeline.stores.semaphore import Semaphore
from pipeline.stores.tracking import TrackingStore
from tests.conftest import drain_queue, emf_totals


@pytest.fixture
def batch_env(resources, monkeypatch):
    monkeypatch.setenv("PROCESSING_MODE", "batch")
    from pipeline.handlers import _wiring

    _wiring.reset()
    return resources


def upload(resources, *keys: str) -> None:
    s3 = resources.client("s3")
    for key in keys:
        s3.put_object(Bucket=resources.input_bucket, Key=key, Body=b"hello")


def store(resources) -> TrackingStore:
    return TrackingStore(resources.tracking_table, resources.client("dynamodb"))


def queued_jobs(resources) -> dict[str, JobMessage]:
    return {
        m.job_id: m
        for m in (
            JobMessage.from_json(x["Body"])
            for x in drain_queue(resources.client("sqs"), resources.main_queue_url)
        )
    }


def test_new_jobs_are_queued_with_every_file_of_their_folder(batch_env, lambda_context) -> None:
    upload(batch_env, "claims/a.txt", "claims/b.txt", "hr/x.csv", "root.txt")
    report = batch_trigger.handler({}, lambda_context)
    assert report["decisions"] == {"process": 3}
    queued = queued_jobs(batch_env)
    assert set(queued) == {"claims/", "hr/", "root.txt"}
    record = store(batch_env).get_run(queued["claims/"].run)
    assert record is not None
    assert record.status is JobStatus.QUEUED  # written before the message was sent
    assert record.files == ("claims/a.txt", "claims/b.txt")


def test_complete_is_skipped_failed_is_retried_fresh_active_is_left(batch_env, lambda_context) -> None:
    upload(batch_env, "done/a.txt", "broken/a.txt", "busy/a.txt")
    batch_trigger.handler({}, lambda_context)
    runs = {job: m.run for job, m in queued_jobs(batch_env).items()}
    now = utc_now()
    store(batch_env).transition(runs["done/"], JobStatus.COMPLETE, now)
    store(batch_env).transition(runs["broken/"], JobStatus.FAILED, now, fields={"error": "boom"})
    store(batch_env).transition(runs["busy/"], JobStatus.DETECTING, now)
    report = batch_trigger.handler({}, lambda_context)
    assert report["decisions"] == {"skip_complete": 1, "retry_failed": 1, "skip_active": 1}
    assert set(queued_jobs(batch_env)) == {"broken/"}


def test_a_stale_job_is_stopped_released_marked_failed_then_requeued(batch_env, lambda_context, capsys) -> None:
    upload(batch_env, "stuck/a.txt")
    sfn = batch_env.client("stepfunctions")
    long_ago = utc_now() - timedelta(minutes=45)
    run = RunRef("stuck/", format_timestamp(long_ago))
    tracking = store(batch_env)
    tracking.create_run(run, ["stuck/a.txt"], batch_env.input_bucket, long_ago)
    arn = sfn.start_execution(
        stateMachineArn=batch_env.state_machine_arn, name=run.execution_name, input="{}"
    )["executionArn"]
    tracking.record_execution(run, arn, [])
    tracking.transition(run, JobStatus.DETECTING, long_ago)
    sem = Semaphore(batch_env.coordination_table, batch_env.client("dynamodb"))
    sem.acquire(run.execution_name, format_timestamp(long_ago), 5)

    report = batch_trigger.handler({}, lambda_context)

    assert report["reclaimed"] == ["stuck/"]
    assert sfn.describe_execution(executionArn=arn)["status"] == "ABORTED"
    assert sem.read().holders == {}
    old = tracking.get_run(run)
    assert old is not None and old.status is JobStatus.FAILED and old.error == "StaleJobReclaimed"
    requeued = queued_jobs(batch_env)["stuck/"]
    assert requeued.run != run
    assert tracking.get_run(requeued.run).status is JobStatus.QUEUED  # type: ignore[union-attr]
    totals = emf_totals(capsys.readouterr().out)
    assert (totals["StaleJobsReclaimed"], totals["JobsFailed"], totals["SlotsReleased"]) == (1, 1, 1)


def test_at_most_the_configured_number_of_jobs_per_run(batch_env, lambda_context, monkeypatch) -> None:
    monkeypatch.setenv("MAX_JOBS_PER_RUN", "3")
    from pipeline.handlers import _wiring

    _wiring.reset()
    upload(batch_env, *(f"job{i}/a.txt" for i in range(5)))
    assert len(batch_trigger.handler({}, lambda_context)["queued"]) == 3
    assert len(batch_trigger.handler({}, lambda_context)["queued"]) == 2


# -- bounded retries -------------------------------------------------------------------------


def fake_clock(monkeypatch, start: datetime) -> list[datetime]:
    """The handler's clock, advanced by the test (a one-element list: `clock[0] += ...`)."""
    clock = [start]
    monkeypatch.setattr(batch_trigger, "utc_now", lambda: clock[0])
    return clock


def test_a_failed_job_is_retried_until_its_attempts_run_out_then_stays_failed_with_the_reason(
    batch_env, lambda_context, monkeypatch
) -> None:
    monkeypatch.setenv("BATCH_MAX_ATTEMPTS", "2")
    from pipeline.handlers import _wiring

    _wiring.reset()
    upload(batch_env, "broken/a.txt")
    # Ticks after the upload (its LastModified), five minutes apart, as the schedule fires.
    clock = fake_clock(monkeypatch, utc_now() + timedelta(minutes=1))
    tracking = store(batch_env)

    assert batch_trigger.handler({}, lambda_context)["decisions"] == {"process": 1}
    first = queued_jobs(batch_env)["broken/"].run
    tracking.transition(first, JobStatus.FAILED, clock[0], fields={"error": "boom", "cause": "bad input"})

    clock[0] += timedelta(minutes=5)
    assert batch_trigger.handler({}, lambda_context)["decisions"] == {"retry_failed": 1}
    second = queued_jobs(batch_env)["broken/"].run
    assert second != first
    tracking.transition(second, JobStatus.FAILED, clock[0], fields={"error": "boom", "cause": "bad input"})

    clock[0] += timedelta(minutes=5)
    report = batch_trigger.handler({}, lambda_context)
    assert report["decisions"] == {"give_up": 1}
    assert report["gave_up"] == ["broken/"] and report["queued"] == []
    assert queued_jobs(batch_env) == {}
    latest = tracking.get_run(second)
    assert latest is not None and latest.status is JobStatus.FAILED
    assert latest.error == "retries_exhausted"
    assert "2 of 2" in (latest.cause or "") and "boom" in (latest.cause or "")

    from pipeops.views import run_summary

    assert run_summary(latest)["error"] == "retries_exhausted"  # what `pipeops jobs` shows

    clock[0] += timedelta(minutes=5)
    report = batch_trigger.handler({}, lambda_context)
    assert report["decisions"] == {"skip_exhausted": 1}
    assert report["gave_up"] == [] and queued_jobs(batch_env) == {}
    assert tracking.get_run(second) == latest  # given up once: nothing written again


# -- the reclaim: conditional claim first, then stop, then release -------------------------------


def stale_run(
    resources, job_id: str, status: JobStatus, *, record_arn: bool = True, started_after_upload: bool = False
) -> tuple[RunRef, str, Semaphore]:
    """A run silent for 45 min in `status`, its execution RUNNING, its slot held.

    It started 45 min ago, before its file's current version (an attempt at older content), or
    with `started_after_upload` a second after the upload (an attempt at the current content).
    """
    upload(resources, f"{job_id}a.txt")
    sfn = resources.client("stepfunctions")
    long_ago = utc_now() - timedelta(minutes=45)
    started = utc_now() + timedelta(seconds=1) if started_after_upload else long_ago
    run = RunRef(job_id, format_timestamp(started))
    tracking = store(resources)
    tracking.create_run(run, [f"{job_id}a.txt"], resources.input_bucket, long_ago)
    arn = sfn.start_execution(
        stateMachineArn=resources.state_machine_arn, name=run.execution_name, input="{}"
    )["executionArn"]
    if record_arn:
        tracking.record_execution(run, arn, [])
    if status is not JobStatus.QUEUED:
        tracking.transition(run, status, long_ago)
    sem = Semaphore(resources.coordination_table, resources.client("dynamodb"))
    sem.acquire(run.execution_name, format_timestamp(long_ago), 5)
    return run, arn, sem


def test_reclaim_leaves_a_run_that_moved_after_the_snapshot_alone(
    batch_env, lambda_context, monkeypatch
) -> None:
    run, arn, sem = stale_run(batch_env, "slow/", JobStatus.DETECTING)
    tracking = store(batch_env)
    observe = TrackingStore.latest_runs

    def snapshot_then_progress(self: TrackingStore, job_ids):
        observed = observe(self, job_ids)  # the trigger sees the run silent for 45 min ...
        tracking.transition(run, JobStatus.DETECT_COMPLETE, utc_now())  # ... then the workflow moves on
        return observed

    monkeypatch.setattr(TrackingStore, "latest_runs", snapshot_then_progress)

    report = batch_trigger.handler({}, lambda_context)

    assert report["decisions"] == {"reclaim_stale": 1}
    assert report["lost_races"] == ["slow/"] and report["reclaimed"] == [] and report["queued"] == []
    sfn = batch_env.client("stepfunctions")
    assert sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"  # the healthy run is not stopped
    assert run.execution_name in sem.read().holders  # and its slot is still held
    assert tracking.get_run(run).status is JobStatus.DETECT_COMPLETE  # type: ignore[union-attr]
    assert queued_jobs(batch_env) == {}


def test_reclaim_stops_an_execution_whose_arn_was_never_recorded(batch_env, lambda_context) -> None:
    # The router started the execution and died before recording its ARN: the name is deterministic.
    run, arn, sem = stale_run(batch_env, "orphan/", JobStatus.IN_PROGRESS, record_arn=False)

    report = batch_trigger.handler({}, lambda_context)

    assert report["reclaimed"] == ["orphan/"]
    assert batch_env.client("stepfunctions").describe_execution(executionArn=arn)["status"] == "ABORTED"
    assert sem.read().holders == {}
    assert queued_jobs(batch_env)["orphan/"].run != run


def test_a_reclaim_interrupted_after_its_claim_is_finished_before_the_job_is_retried(
    batch_env, lambda_context
) -> None:
    # A crash after the FAILED write left the execution running and the slot held.
    run, arn, sem = stale_run(batch_env, "halfway/", JobStatus.DETECTING)
    tracking = store(batch_env)
    tracking.transition(run, JobStatus.FAILED, utc_now(), fields={"error": "StaleJobReclaimed"})

    report = batch_trigger.handler({}, lambda_context)

    assert report["decisions"] == {"retry_failed": 1}
    assert batch_env.client("stepfunctions").describe_execution(executionArn=arn)["status"] == "ABORTED"
    assert sem.read().holders == {}
    assert queued_jobs(batch_env)["halfway/"].run != run


# -- overwritten files -----------------------------------------------------------------------


def test_a_completed_job_whose_file_changed_after_its_run_started_is_processed_again(
    batch_env, lambda_context
) -> None:
    tracking = store(batch_env)
    # `before/` completed a run that started before its file's current version was written
    # (an overwrite); `after/` completed a run that started after its upload.
    earlier = utc_now() - timedelta(minutes=10)
    overwritten = RunRef("before/", format_timestamp(earlier))
    tracking.create_run(overwritten, ["before/a.txt"], batch_env.input_bucket, earlier)
    tracking.transition(overwritten, JobStatus.COMPLETE, earlier)
    upload(batch_env, "before/a.txt", "after/a.txt")
    later = utc_now() + timedelta(seconds=1)
    unchanged = RunRef("after/", format_timestamp(later))
    tracking.create_run(unchanged, ["after/a.txt"], batch_env.input_bucket, later)
    tracking.transition(unchanged, JobStatus.COMPLETE, later)

    report = batch_trigger.handler({}, lambda_context)

    assert report["decisions"] == {"process": 1, "skip_complete": 1}
    again = queued_jobs(batch_env)
    assert set(again) == {"before/"}
    assert tracking.get_run(again["before/"].run).files == ("before/a.txt",)  # type: ignore[union-attr]


def test_a_stale_run_that_was_the_last_attempt_is_reclaimed_and_given_up(
    batch_env, lambda_context, monkeypatch
) -> None:
    monkeypatch.setenv("BATCH_MAX_ATTEMPTS", "1")
    from pipeline.handlers import _wiring

    _wiring.reset()
    run, arn, sem = stale_run(batch_env, "hung/", JobStatus.DETECTING, started_after_upload=True)

    report = batch_trigger.handler({}, lambda_context)

    assert report["reclaimed"] == ["hung/"] and report["gave_up"] == ["hung/"] and report["queued"] == []
    assert batch_env.client("stepfunctions").describe_execution(executionArn=arn)["status"] == "ABORTED"
    assert sem.read().holders == {}
    record = store(batch_env).get_run(run)
    assert record is not None and record.status is JobStatus.FAILED
    assert record.error == "retries_exhausted" and "StaleJobReclaimed" in (record.cause or "")
    assert queued_jobs(batch_env) == {}
