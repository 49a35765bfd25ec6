"""Async invocations that keep failing are parked in their OnFailure DLQ, and `pipeops status` says so.

EventBridge invokes ingest and the tracker asynchronously: a handler error is Lambda's to retry
(the functions' EventInvokeConfig: 2 retries), then the event goes to the OnFailure destination.
moto's CloudFormation does not create EventInvokeConfig; before the sandbox created it, such an
event was silently lost (a lost status event leaks a slot; a lost upload event loses a file).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from typer.testing import CliRunner

from pipeops.cli import app
from sandbox.clock import TimeScale
from tests.conftest import envelope

pytestmark = pytest.mark.slow
PARK_TIMEOUT = 120.0


@pytest.fixture
def sandbox(make_sandbox: Any) -> Any:
    """Lambda's two async retries wait 1 and 2 virtual minutes: 3.6 s at this time scale, not 9 s."""
    return make_sandbox(time_scale=TimeScale(0.02))


def parked(sandbox: Any, output: str) -> list[dict[str, Any]]:
    """Wait until the queue holds a message (Lambda's retries take minutes, scaled to seconds)."""
    sqs = sandbox.client("sqs")
    deadline = time.monotonic() + PARK_TIMEOUT
    while time.monotonic() < deadline:
        messages = sqs.receive_message(
            QueueUrl=sandbox.outputs[output], MaxNumberOfMessages=10, VisibilityTimeout=0
        ).get("Messages", [])
        if messages:
            return [json.loads(m["Body"]) for m in messages]
        time.sleep(0.2)
    pytest.fail(f"nothing reached {output}")


def status_findings(sandbox: Any) -> set[str]:
    result = CliRunner().invoke(app, ["status", "--json"])
    data = envelope(result.output, "status")
    assert result.exit_code == (1 if data["pages"] else 0), result.output  # a DLQ message pages: 1
    return {finding["name"] for finding in data["findings"]}


def test_a_failing_tracker_parks_the_status_event_in_its_dlq(sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def tracker_down(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("tracker outage (injected)")

    monkeypatch.setattr("pipeline.handlers.workflow_tracker.track", tracker_down)
    sandbox.client("s3").put_object(Bucket=sandbox.outputs["InputBucketName"], Key="t.txt", Body=b"hello\n")

    [first, *_] = parked(sandbox, "TrackerDeadLetterQueueUrl")
    assert first["requestContext"]["condition"] == "RetriesExhausted"
    assert first["requestPayload"]["detail-type"] == "Step Functions Execution Status Change"
    assert "TrackerDlqNotEmpty" in status_findings(sandbox)


def test_a_failing_ingest_parks_the_upload_event_and_status_shows_it(
    sandbox: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def ingest_down(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ingest outage (injected)")

    monkeypatch.setattr("pipeline.handlers.ingest.ingest_object", ingest_down)
    sandbox.client("s3").put_object(Bucket=sandbox.outputs["InputBucketName"], Key="lost.txt", Body=b"x\n")

    [first, *_] = parked(sandbox, "IngestDeadLetterQueueUrl")
    assert first["requestPayload"]["detail"]["object"]["key"] == "lost.txt"
    assert "IngestDlqNotEmpty" in status_findings(sandbox)
