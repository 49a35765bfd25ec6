"""Ingest: S3 object created → QUEUED run → one message per run, every file accounted for,
each object version in exactly one run however often its event is delivered."""

from __future__ import annotations

import pytest

from pipeline.handlers import ingest
from pipeline.jobs import JobMessage, utc_now
from pipeline.status import JobStatus
from pipeline.stores.claims import ClaimsStore
from pipeline.stores.tracking import TrackingStore
from tests.conftest import drain_queue, eventbridge_object_created


def store(resources) -> TrackingStore:
    return TrackingStore(resources.tracking_table, resources.client("dynamodb"))


@pytest.mark.parametrize(
    "key",
    ["plain.txt", "with space/and+plus.txt", "unicodé/ファイル.txt", "deep/er/still/file name.csv"],
)
def test_keys_are_url_decoded_into_the_queued_run(resources, lambda_context, key: str) -> None:
    ingest.handler(eventbridge_object_created(resources.input_bucket, key), lambda_context)
    messages = drain_queue(resources.client("sqs"), resources.main_queue_url)
    assert len(messages) == 1
    message = JobMessage.from_json(messages[0]["Body"])
    record = store(resources).get_run(message.run)
    assert record is not None
    assert record.status is JobStatus.QUEUED
    assert record.files == (key,)
    assert record.queued_at


def test_files_of_one_folder_join_one_pending_run_announced_once(resources, lambda_context) -> None:
    for name in ("a.txt", "b.txt", "c.md"):
        ingest.handler(eventbridge_object_created(resources.input_bucket, f"claims/{name}"), lambda_context)
    messages = drain_queue(resources.client("sqs"), resources.main_queue_url)
    assert len(messages) == 1
    record = store(resources).get_run(JobMessage.from_json(messages[0]["Body"]).run)
    assert record is not None and record.files == ("claims/a.txt", "claims/b.txt", "claims/c.md")


def test_a_file_arriving_after_its_folder_started_opens_the_next_run(resources, lambda_context) -> None:
    tracking = store(resources)
    ingest.handler(eventbridge_object_created(resources.input_bucket, "claims/a.txt"), lambda_context)
    first = JobMessage.from_json(drain_queue(resources.client("sqs"), resources.main_queue_url)[0]["Body"]).run
    tracking.transition(first, JobStatus.IN_PROGRESS, utc_now())
    ingest.handler(eventbridge_object_created(resources.input_bucket, "claims/late.txt"), lambda_context)
    second = JobMessage.from_json(drain_queue(resources.client("sqs"), resources.main_queue_url)[0]["Body"]).run
    assert second != first
    assert tracking.get_run(first).files == ("claims/a.txt",)  # type: ignore[union-attr]
    assert tracking.get_run(second).files == ("claims/late.txt",)  # type: ignore[union-attr]


def test_an_event_about_no_created_object_starts_no_run(resources, lambda_context) -> None:
    deleted = eventbridge_object_created(resources.input_bucket, "claims/a.txt") | {"detail-type": "Object Deleted"}
    assert ingest.handler(deleted, lambda_context) == {"outcome": None}
    assert drain_queue(resources.client("sqs"), resources.main_queue_url) == []


def test_a_redelivered_event_announces_its_run_again(resources, lambda_context) -> None:
    event = eventbridge_object_created(resources.input_bucket, "claims/a.txt")
    ingest.handler(event, lambda_context)
    ingest.handler(event, lambda_context)
    bodies = [m["Body"] for m in drain_queue(resources.client("sqs"), resources.main_queue_url)]
    assert len(bodies) == 2 and bodies[0] == bodies[1]  # same run: the router starts it once


# ---------------------------------------------------- exactly one run per S3 object version

SEQ_1, SEQ_2 = "0055AED6DCD90281E5", "0055AED6DCD90281E6"


def created(resources, key: str, sequencer: str, version_id: str = "") -> dict:
    """An "Object Created" event naming the object version, as S3 sends it to EventBridge."""
    event = eventbridge_object_created(resources.input_bucket, key)
    event["detail"]["object"]["sequencer"] = sequencer
    if version_id:
        event["detail"]["object"]["version-id"] = version_id
    return event


def announced(resources) -> list[JobMessage]:
    return [JobMessage.from_json(m["Body"]) for m in drain_queue(resources.client("sqs"), resources.main_queue_url)]


@pytest.mark.parametrize("after", [JobStatus.IN_PROGRESS, JobStatus.COMPLETE, JobStatus.FAILED])
def test_a_redelivery_after_its_run_started_or_ended_puts_the_file_in_no_second_run(
    resources, lambda_context, after: JobStatus
) -> None:
    tracking = store(resources)
    event = created(resources, "claims/a.txt", SEQ_1, "v1")
    ingest.handler(event, lambda_context)
    [message] = announced(resources)
    tracking.transition(message.run, JobStatus.IN_PROGRESS, utc_now())  # the router froze it
    ingest.handler(event, lambda_context)
    tracking.transition(message.run, after, utc_now())
    ingest.handler(event, lambda_context)
    ingest.handler({**event, "id": "another-event-id"}, lambda_context)  # S3 may send one twice
    assert announced(resources) == []
    assert [(r.run, r.files) for r in tracking.runs_of("claims/")] == [(message.run, ("claims/a.txt",))]


def test_a_redelivery_while_its_run_is_queued_announces_that_run_again(resources, lambda_context) -> None:
    event = created(resources, "claims/a.txt", SEQ_1)
    ingest.handler(event, lambda_context)
    ingest.handler(created(resources, "claims/b.txt", SEQ_1), lambda_context)  # a sibling joins
    ingest.handler(event, lambda_context)
    first, again = announced(resources)
    assert first == again
    [run] = store(resources).runs_of("claims/")
    assert run.files == ("claims/a.txt", "claims/b.txt")


def test_a_new_version_of_a_processed_key_is_processed_again(resources, lambda_context) -> None:
    tracking = store(resources)
    ingest.handler(created(resources, "claims/a.txt", SEQ_1, "v1"), lambda_context)
    [first] = announced(resources)
    tracking.transition(first.run, JobStatus.COMPLETE, utc_now())
    ingest.handler(created(resources, "claims/a.txt", SEQ_2, "v2"), lambda_context)
    [second] = announced(resources)
    assert second.run != first.run
    assert [(r.run, r.files) for r in tracking.runs_of("claims/")] == [
        (second.run, ("claims/a.txt",)),
        (first.run, ("claims/a.txt",)),
    ]


def test_a_new_version_while_the_run_is_queued_joins_it_once(resources, lambda_context) -> None:
    ingest.handler(created(resources, "claims/a.txt", SEQ_1), lambda_context)
    ingest.handler(created(resources, "claims/a.txt", SEQ_2), lambda_context)
    [message] = announced(resources)  # the run reads the object when it starts: the latest version
    assert [r.run for r in store(resources).runs_of("claims/")] == [message.run]


def test_an_older_version_arriving_after_a_newer_one_is_skipped(resources, lambda_context) -> None:
    tracking = store(resources)
    ingest.handler(created(resources, "claims/a.txt", SEQ_2), lambda_context)
    [message] = announced(resources)
    tracking.transition(message.run, JobStatus.COMPLETE, utc_now())
    ingest.handler(created(resources, "claims/a.txt", SEQ_1), lambda_context)
    assert announced(resources) == []
    assert [r.run for r in tracking.runs_of("claims/")] == [message.run]
    claims = ClaimsStore(resources.tracking_table, resources.coordination_table, resources.client("dynamodb"))
    claim = claims.object_claim(resources.input_bucket, "claims/a.txt")
    assert claim is not None and claim.version.sequencer == SEQ_2 and claim.run == message.run


def test_a_crash_between_claim_and_announcement_is_recovered_by_the_retry(
    resources, lambda_context, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = ingest._wiring.job_queue()
    calls: list[JobMessage] = []

    class FlakyQueue:
        def send(self, message: JobMessage, delay: int) -> None:
            calls.append(message)
            if len(calls) == 1:
                raise ConnectionError("the function died before the message left")
            real.send(message, delay)

    monkeypatch.setattr(ingest._wiring, "job_queue", FlakyQueue)
    event = created(resources, "solo.txt", SEQ_1)
    with pytest.raises(ConnectionError):
        ingest.handler(event, lambda_context)  # EventBridge → Lambda async: retried
    assert announced(resources) == []
    ingest.handler(event, lambda_context)
    [message] = announced(resources)
    assert calls == [message, message]
    [run] = store(resources).runs_of("solo.txt")
    assert run.run == message.run and run.files == ("solo.txt",)


# ------------------------------------------------------- keys as S3 has them, folder markers

# '+', '%', spaces and unicode, in a folder and at the root.
AWKWARD_KEYS = ["c++/a+b.txt", "100% sure.txt", "with space/file name.csv", "unicodé/ファイル 1+1.txt"]


def queued_files(resources) -> list[tuple[str, ...]]:
    tracking = store(resources)
    return [tracking.get_run(m.run).files for m in announced(resources)]  # type: ignore[union-attr]


@pytest.mark.parametrize("encoded", [True, False], ids=["url-encoded", "as-is"])
@pytest.mark.parametrize("key", AWKWARD_KEYS)
def test_an_eventbridge_event_names_the_key_s3_has_encoded_or_not(
    resources, lambda_context, key: str, encoded: bool
) -> None:
    resources.client("s3").put_object(Bucket=resources.input_bucket, Key=key, Body=b"abc")
    event = eventbridge_object_created(resources.input_bucket, key)
    if not encoded:
        event["detail"]["object"]["key"] = key
    ingest.handler(event, lambda_context)
    assert queued_files(resources) == [(key,)]


def test_when_both_forms_exist_the_one_with_the_events_etag_is_taken(resources, lambda_context) -> None:
    s3 = resources.client("s3")
    s3.put_object(Bucket=resources.input_bucket, Key="a b.txt", Body=b"spaces")
    etag = s3.put_object(Bucket=resources.input_bucket, Key="a+b.txt", Body=b"plus")["ETag"]
    event = eventbridge_object_created(resources.input_bucket, "a+b.txt")
    event["detail"]["object"] |= {"key": "a+b.txt", "etag": etag.strip('"')}  # delivered as-is
    ingest.handler(event, lambda_context)
    assert queued_files(resources) == [("a+b.txt",)]


@pytest.mark.parametrize("marker", ["newfolder/", "claims/2026/", "with space/"])
def test_a_folder_marker_from_the_console_starts_no_run(resources, lambda_context, marker: str) -> None:
    resources.client("s3").put_object(Bucket=resources.input_bucket, Key=marker, Body=b"")
    assert ingest.handler(eventbridge_object_created(resources.input_bucket, marker, size=0), lambda_context) == {
        "outcome": None
    }
    assert announced(resources) == []
    assert store(resources).runs_of(marker.rstrip("/")) == []
