"""A folder larger than MaxFilesPerRun becomes several runs, none of its files dropped.

Realtime: ingest's pending run closes at the maximum (a size condition on the join transaction)
and the next file opens the job's next run. Batch: the trigger splits a folder into runs of at
most the maximum, and decides about the folder from all of them on the next tick.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from pipeline.batch import BatchTrigger, merge_parts, split_files
from pipeline.config import load_settings
from pipeline.ingest import IngestOutcome, ingest_object
from pipeline.jobs import JobMessage
from pipeline.s3events import ObjectCreated, ObjectVersion
from pipeline.status import JobStatus
from pipeline.stores.claims import ClaimsStore
from pipeline.stores.executions import ExecutionsStore
from pipeline.stores.semaphore import Semaphore
from pipeline.stores.tracking import HEAD_SORT_KEY, RunRecord, TrackingStore

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)


def runs_of(resources, job_id: str) -> list[RunRecord]:
    items = resources.client("dynamodb").query(
        TableName=resources.tracking_table,
        KeyConditionExpression="job_id = :j",
        ExpressionAttributeValues={":j": {"S": job_id}},
        ConsistentRead=True,
    )["Items"]
    return [RunRecord.from_item(i) for i in items if i["started_at"]["S"] != HEAD_SORT_KEY]


def ingest(
    store: TrackingStore, claims: ClaimsStore, key: str, settings, sent: list[JobMessage], sequencer: str = "0A", at: int = 0
):
    created = ObjectCreated("in", key, 3, ObjectVersion(sequencer))
    return ingest_object(created, store, claims, lambda m, d: sent.append(m), settings, NOW + timedelta(seconds=at))


# --------------------------------------------------------------------------- realtime


def test_a_pending_run_closes_at_the_max_and_the_next_file_opens_the_next(resources, store, claims) -> None:
    settings = load_settings(resources.env, max_files_per_run=3)
    sent: list[JobMessage] = []
    keys = [f"big/f{index}.txt" for index in range(7)]
    outcomes = [ingest(store, claims, key, settings, sent, at=index).outcome for index, key in enumerate(keys)]
    assert outcomes == [IngestOutcome.NEW_RUN, *[IngestOutcome.JOINED_PENDING_RUN] * 2] * 2 + [IngestOutcome.NEW_RUN]
    runs = sorted(runs_of(resources, "big/"), key=lambda r: r.started_at)
    assert [len(r.files) for r in runs] == [3, 3, 1]
    assert sorted(k for r in runs for k in r.files) == sorted(keys)  # each file in exactly one run
    assert [m.started_at for m in sent] == [r.started_at for r in runs]  # each run announced once
    assert store.pending_run("big/") == runs[-1].run


def test_a_newer_version_of_a_file_already_in_a_full_run_stays_with_it(resources, store, claims) -> None:
    settings = load_settings(resources.env, max_files_per_run=2)
    sent: list[JobMessage] = []
    ingest(store, claims, "big/a.txt", settings, sent, "0A")
    ingest(store, claims, "big/b.txt", settings, sent, "0A", at=1)
    again = ingest(store, claims, "big/a.txt", settings, sent, "0B", at=2)  # overwritten: the run holds it already
    assert again.outcome is IngestOutcome.JOINED_PENDING_RUN
    [run] = runs_of(resources, "big/")
    assert run.files == ("big/a.txt", "big/b.txt")


def test_the_default_max_of_the_longest_keys_fits_one_item_with_the_limits_enforced(resources, store, claims) -> None:
    from sandbox.seams import limits

    settings = load_settings(resources.env)
    sent: list[JobMessage] = []
    limits.install()
    try:
        for index in range(settings.max_files_per_run + 1):
            head = f"long/{index:04d}-"
            ingest(store, claims, head + "k" * (1024 - len(head)), settings, sent, at=index)
    finally:
        limits.uninstall()
    assert sorted(len(r.files) for r in runs_of(resources, "long/")) == [1, settings.max_files_per_run]


# --------------------------------------------------------------------------- batch


def test_split_files_keeps_every_file_once_in_order() -> None:
    assert split_files(["c", "a", "b", "a", "d"], 2) == [("a", "b"), ("c", "d")]
    assert split_files(["a"], 5) == [("a",)]


def part(started_at: str, status: JobStatus, files: tuple[str, ...], updated_at: str = "2026-03-01T12:00:00.000000Z", error: str | None = None) -> RunRecord:
    return RunRecord("big/", started_at, status, updated_at, files=files, queued_at="t", error=error)


def test_merge_parts_shows_all_files_and_the_part_that_needs_attention() -> None:
    done = part("2026-03-01T12:00:00.000000Z", JobStatus.COMPLETE, ("a",))
    failed = part("2026-03-01T12:00:00.000001Z", JobStatus.FAILED, ("b",), error="Boom")
    running = part("2026-03-01T12:00:00.000002Z", JobStatus.REDACTING, ("c",), updated_at="2026-03-01T11:00:00.000000Z")
    assert merge_parts([done, failed, running]) == running.__class__(**{**running.__dict__, "files": ("a", "b", "c")})
    assert merge_parts([done, failed]).error == "Boom"
    assert merge_parts([done, failed]).files == ("a", "b")
    assert merge_parts([done]).status is JobStatus.COMPLETE


@pytest.fixture
def trigger(resources) -> Iterator[tuple[BatchTrigger, list[JobMessage]]]:
    settings = load_settings(resources.env, processing_mode="batch", max_files_per_run=3)
    store = TrackingStore(resources.tracking_table, resources.client("dynamodb"))
    sent: list[JobMessage] = []
    yield (
        BatchTrigger(
            store,
            Semaphore(resources.coordination_table, resources.client("dynamodb")),
            resources.client("s3"),
            ExecutionsStore(resources.client("stepfunctions"), settings.state_machine_arn),
            lambda message, delay: sent.append(message),
            settings,
            resources.client("dynamodb"),
        ),
        sent,
    )


def test_batch_splits_a_folder_and_decides_about_all_its_parts(resources, trigger) -> None:
    batch, sent = trigger
    now = datetime.now(UTC) + timedelta(seconds=5)  # after the uploads' LastModified
    s3 = resources.client("s3")
    keys = [f"big/f{index}.txt" for index in range(7)]
    bad = [f"bad/f{index}.txt" for index in range(4)]
    for key in keys + bad:
        s3.put_object(Bucket=resources.input_bucket, Key=key, Body=b"x")
    first = batch.run(now)
    assert first.decisions == {"process": 2} and sorted(first.queued) == ["bad/", "big/"]
    runs = sorted(runs_of(resources, "big/"), key=lambda r: r.started_at)
    assert [r.files for r in runs] == [tuple(keys[0:3]), tuple(keys[3:6]), tuple(keys[6:])]
    assert len({r.queued_at for r in runs}) == 1
    assert [m.started_at for m in sent if m.job_id == "big/"] == [r.started_at for r in runs]

    store = TrackingStore(resources.tracking_table, resources.client("dynamodb"))
    bad_runs = sorted(runs_of(resources, "bad/"), key=lambda r: r.started_at)
    assert [len(r.files) for r in bad_runs] == [3, 1]
    for run in [*runs, *bad_runs]:
        store.transition(run.run, JobStatus.IN_PROGRESS, now + timedelta(minutes=1))
        # the first part of bad/ fails, everything else completes
        final = JobStatus.FAILED if run.run == bad_runs[0].run else JobStatus.COMPLETE
        store.transition(run.run, final, now + timedelta(minutes=2), fields={"error": "Boom"} if final is JobStatus.FAILED else None)
    second = batch.run(now + timedelta(minutes=5))
    assert second.decisions == {"skip_complete": 1, "retry_failed": 1}, "a folder is done only when all its parts are"
    assert second.queued == ["bad/"]
    retried = sorted(runs_of(resources, "bad/"), key=lambda r: r.started_at)[2:]
    assert [r.files for r in retried] == [tuple(bad[:3]), tuple(bad[3:])], "the whole folder again, split"
