"""A scheduled invocation that fails is kept in ScheduledDeadLetterQueue, once, without a retry.

The reconciler and the batch trigger are invoked asynchronously by their schedules. Their
EventInvokeConfig sends a failed invocation to the queue at once (MaximumRetryAttempts 0: the next
tick is the retry); before it, such a failure left no trace but the function's Errors metric.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from sandbox.clock import TimeScale

pytestmark = pytest.mark.slow
PARK_TIMEOUT = 120.0


@pytest.fixture
def sandbox(make_sandbox: Any) -> Any:
    """The reconciler's 5-minute schedule fires every 6 s at this time scale."""
    return make_sandbox(time_scale=TimeScale(0.02))


def queue_url(sandbox: Any, logical_id: str) -> str:
    """The queue has no stack output (pipeops does not read it): found by the name CloudFormation gave it."""
    prefix = f"{sandbox.stack_name}-{logical_id}-"
    (url,) = sandbox.client("sqs").list_queues(QueueNamePrefix=prefix)["QueueUrls"]
    return url


def test_a_failing_scheduled_reconciler_is_parked_without_a_retry(
    sandbox: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def reconciler_down(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("reconciler outage (injected)")

    monkeypatch.setattr("monitors.reconcile.handler.reconcile", reconciler_down)
    url = queue_url(sandbox, "ScheduledDeadLetterQueue")
    sqs = sandbox.client("sqs")
    deadline = time.monotonic() + PARK_TIMEOUT
    messages: list[dict[str, Any]] = []
    while not messages and time.monotonic() < deadline:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0).get("Messages", [])
        time.sleep(0.2)
    assert messages, "no failed scheduled invocation reached ScheduledDeadLetterQueue"
    record = json.loads(messages[0]["Body"])
    context = record["requestContext"]
    assert context["condition"] == "RetriesExhausted"
    assert context["approximateInvokeCount"] == 1  # not retried: the next tick is the retry
    assert sandbox.outputs["ReconcilerFunctionName"] in context["functionArn"]
    assert record["requestPayload"] == {}  # the schedule's constant Input (template.yaml)
    assert "reconciler outage" in json.dumps(record["responsePayload"])
