"""EventBridge deliveries under injected faults, with the pipeline running: execution status events
lost to the tracker's DLQ (the slot stays held: what the alarm and the runbook are for), held
during a tracker outage and delivered when it ends, delivered twice (the second release finds no
holder); S3 events delivered twice (the object is claimed once) and late."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pipeline.jobs import execution_name
from pipeline.status import JobStatus
from pipeops import faults
from pipeops.faults import FaultTarget
from tests.conftest import depth, eventually, put, run_of, runs, semaphore_item

pytestmark = pytest.mark.slow


def completed(sandbox: Any, key: str) -> Any:
    run = run_of(sandbox, key)
    return run if run is not None and run.status is JobStatus.COMPLETE else None


def holder_of(run: Any) -> str:
    return execution_name(run.job_id, run.started_at)


def invocations_of(sandbox: Any, output: str) -> int:
    name = sandbox.outputs[output]
    return sum(1 for record in sandbox.runtime.invocations if record.function_name == name)


def test_status_events_lost_held_and_duplicated(make_sandbox: Any) -> None:
    sandbox = make_sandbox(ReconcileApply="false")  # what the faults leave is not repaired behind our back
    target = FaultTarget.of_sandbox(sandbox)

    faults.inject(target, "tracker-dlq-events")
    put(sandbox, "lost.txt")
    eventually(lambda: depth(sandbox, "TrackerDeadLetterQueueUrl") >= 1, "the status event reached the tracker DLQ")
    lost = eventually(lambda: completed(sandbox, "lost.txt"), "the run completed")
    dead = sandbox.client("sqs").receive_message(
        QueueUrl=sandbox.outputs["TrackerDeadLetterQueueUrl"], MessageAttributeNames=["All"]
    )["Messages"][0]
    assert json.loads(dead["Body"])["detail"]["status"] == "SUCCEEDED"
    attributes = {name: value["StringValue"] for name, value in dead["MessageAttributes"].items()}
    assert attributes["ERROR_CODE"] == "THROTTLING" and attributes["RETRY_ATTEMPTS"] == "185"
    assert attributes["EXHAUSTED_RETRY_CONDITION"] == "MaximumRetryAttempts"
    assert holder_of(lost) in semaphore_item(sandbox)["holders"], "no tracker released the slot"
    faults.clear(target, "tracker-dlq-events")

    faults.inject(target, "status-events-paused")
    put(sandbox, "held.txt")
    held = eventually(lambda: completed(sandbox, "held.txt"), "the run completed")
    eventually(lambda: faults.active(target)[0]["faulted"] >= 1, "the status event was held")
    assert holder_of(held) in semaphore_item(sandbox)["holders"], "the held event released nothing yet"
    faults.clear(target, "status-events-paused")
    eventually(lambda: holder_of(held) not in semaphore_item(sandbox)["holders"], "the held event, delivered, released the slot")

    trackers = invocations_of(sandbox, "WorkflowTrackerFunctionName")
    faults.inject(target, "status-events-duplicated")
    put(sandbox, "twice.txt")
    twice = eventually(lambda: completed(sandbox, "twice.txt"), "the run completed")
    eventually(lambda: invocations_of(sandbox, "WorkflowTrackerFunctionName") >= trackers + 2, "the tracker ran twice")
    assert sandbox.wait_until_idle(120)
    slots = semaphore_item(sandbox)
    assert holder_of(twice) not in slots["holders"]
    assert slots == {"active_count": 1, "holders": {holder_of(lost): slots["holders"][holder_of(lost)]}}, (
        "the duplicate released nothing more: only the lost event's slot is still held"
    )


def test_s3_events_duplicated_and_late(make_sandbox: Any) -> None:
    sandbox = make_sandbox()
    target = FaultTarget.of_sandbox(sandbox)
    ingests = invocations_of(sandbox, "IngestFunctionName")
    faults.inject(target, "s3-events-duplicated")
    put(sandbox, "dup.txt")
    eventually(lambda: completed(sandbox, "dup.txt"), "the run completed")
    eventually(lambda: invocations_of(sandbox, "IngestFunctionName") >= ingests + 2, "ingest ran twice")
    faults.clear(target)

    [late] = faults.inject(target, "s3-events-late")
    assert late["effect"] == "delay" and late["delay_seconds"] == 120.0
    put(sandbox, "late.txt")
    eventually(lambda: completed(sandbox, "late.txt"), "the late event's run completed")
    assert faults.active(target)[0]["faulted"] == 1
    assert sandbox.wait_until_idle(120)
    assert sorted(run.files for run in runs(sandbox)) == [("dup.txt",), ("late.txt",)], "one run per object"
    assert semaphore_item(sandbox) == {"active_count": 0, "holders": {}}
