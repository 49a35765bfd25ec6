"""Ingest: S3 object created → QUEUED run → one message per run, every file accounted for."""

from __future__ import annotations

import json

import pytest

from pipeline.handlers import ingest
from pipeline.jobs import JobMessage, utc_now
from pipeline.status import JobStatus
from pipeline.stores.tracking import TrackingStore
from tests.conftest import drain_queue, eventbridge_object_created, sqs_event


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


def test_a_redelivered_event_announces_its_run_again(resources, lambda_context) -> None:
    event = eventbridge_object_created(resources.input_bucket, "claims/a.txt")
    ingest.handler(event, lambda_context)
    ingest.handler(event, lambda_context)
    bodies = [m["Body"] for m in drain_queue(resources.client("sqs"), resources.main_queue_url)]
    assert len(bodies) == 2 and bodies[0] == bodies[1]  # same run: the router starts it once


def test_s3_test_events_and_sqs_wrapped_notifications(resources, lambda_context) -> None:
    test_event = json.dumps({"Service": "Amazon S3", "Event": "s3:TestEvent", "Bucket": resources.input_bucket})
    notification = json.dumps(
        {
            "Records": [
                {
                    "eventName": "ObjectCreated:Put",
                    "s3": {"bucket": {"name": resources.input_bucket}, "object": {"key": "root+file.txt", "size": 3}},
                }
            ]
        }
    )
    result = ingest.handler(sqs_event(("m1", test_event), ("m2", notification)), lambda_context)
    assert result == {"batchItemFailures": []}
    messages = drain_queue(resources.client("sqs"), resources.main_queue_url)
    assert len(messages) == 1
    assert JobMessage.from_json(messages[0]["Body"]).job_id == "root file.txt"
