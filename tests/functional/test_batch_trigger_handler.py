"""Batch trigger on moto: each decision acted on, stale runs reclaimed in the safe order."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pipeline.handlers import batch_trigger
from pipeline.jobs import JobMessage, RunRef, format_timestamp, utc_now
from pipeline.status import JobStatus
from pipeline.stores.semaphore import Semaphore
from pipeline.stores.tracking import TrackingStore
from tests.conftest import drain_queue


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
        for m in (JobMessage.from_json(x["Body"]) for x in drain_queue(resources.client("sqs"), resources.main_queue_url))
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


def test_a_stale_job_is_stopped_released_marked_failed_then_requeued(batch_env, lambda_context) -> None:
    upload(batch_env, "stuck/a.txt")
    sfn = batch_env.client("stepfunctions")
    long_ago = utc_now() - timedelta(minutes=45)
    run = RunRef("stuck/", format_timestamp(long_ago))
    tracking = store(batch_env)
    tracking.create_run(run, ["stuck/a.txt"], batch_env.input_bucket, long_ago)
    arn = sfn.start_execution(stateMachineArn=batch_env.state_machine_arn, name=run.execution_name, input="{}")[
        "executionArn"
    ]
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


def test_at_most_the_configured_number_of_jobs_per_run(batch_env, lambda_context, monkeypatch) -> None:
    monkeypatch.setenv("MAX_JOBS_PER_RUN", "3")
    from pipeline.handlers import _wiring

    _wiring.reset()
    upload(batch_env, *(f"job{i}/a.txt" for i in range(5)))
    assert len(batch_trigger.handler({}, lambda_context)["queued"]) == 3
    assert len(batch_trigger.handler({}, lambda_context)["queued"]) == 2
