"""The AWS/SQS CloudWatch metrics that moto does not publish, published by the sandbox.

AWS publishes queue metrics every minute; moto publishes none, so a backlog-age alarm or the
status snapshot's "oldest message age" would have nothing to read. This publisher reads moto's
own queues (the backend lives in this process, in-process or served) and puts
ApproximateAgeOfOldestMessage and the message counts under AWS/SQS with the QueueName dimension,
as AWS does. Ages are reported in virtual seconds (real seconds / time-scale factor), so
thresholds written for AWS read the same in the sandbox. They are stored straight into the
in-process CloudWatch backend, every queue's at once (`emf.put_in_process`: SQS publishes its
metrics internally, not through PutMetricData, and a call per queue per tick cost CPU the
handlers share).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from sandbox import emf
from sandbox.background import Periodic
from sandbox.clock import TimeScale

LOG = logging.getLogger("sandbox.sqs_metrics")
NAMESPACE = "AWS/SQS"


def _queues(account_id: str, region: str) -> Iterator[Any]:
    from moto.sqs.models import sqs_backends

    yield from list(sqs_backends[account_id][region].queues.values())


def queue_metrics(queue: Any, now_ms: int, time_scale: TimeScale) -> list[dict[str, Any]]:
    """MetricData for one moto queue at `now_ms`."""
    messages = list(queue._messages)  # moto's store: every message not yet deleted
    oldest_ms = min((m.sent_timestamp for m in messages if m.sent_timestamp), default=None)
    age = 0.0 if oldest_ms is None else time_scale.to_virtual(max(0, now_ms - oldest_ms) / 1000)
    dimensions = [{"Name": "QueueName", "Value": queue.name}]
    counts = {
        "ApproximateNumberOfMessagesVisible": sum(1 for m in messages if m.visible and not m.delayed),
        "ApproximateNumberOfMessagesNotVisible": sum(1 for m in messages if not m.visible),
        "ApproximateNumberOfMessagesDelayed": sum(1 for m in messages if m.delayed),
    }
    data = [
        {
            "MetricName": "ApproximateAgeOfOldestMessage",
            "Dimensions": dimensions,
            "Unit": "Seconds",
            "Value": age,
        }
    ]
    data += [
        {"MetricName": name, "Dimensions": dimensions, "Unit": "Count", "Value": value}
        for name, value in counts.items()
    ]
    return data


class SqsMetricsPublisher(Periodic):
    """Publishes AWS/SQS metrics for every queue every `interval` real seconds, on a daemon thread."""

    def __init__(
        self,
        *,
        region: str = "us-east-1",
        endpoint_url: str | None = None,
        account_id: str | None = None,
        time_scale: TimeScale | None = None,
        interval: float = 1.0,
    ) -> None:
        from moto.core import DEFAULT_ACCOUNT_ID

        self.region = region
        self.account_id = account_id or DEFAULT_ACCOUNT_ID
        self.time_scale = time_scale or TimeScale(1.0)
        # endpoint_url is accepted as the other parts take it: the backend read and written is this process's.
        super().__init__("sandbox-sqs-metrics", interval, LOG, "could not publish SQS metrics")

    def publish_once(self) -> int:
        now_ms = int(time.time() * 1000)
        data = [
            datum
            for queue in _queues(self.account_id, self.region)
            for datum in queue_metrics(queue, now_ms, self.time_scale)
        ]
        return emf.put_in_process(NAMESPACE, data, account_id=self.account_id, region=self.region)

    def tick(self) -> object:
        return self.publish_once()
