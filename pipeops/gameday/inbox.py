"""An alarm topic's inbox: an SQS queue subscribed to it, as a pager would be, and what reached it.

The one place that subscribes a queue to one of the stack's alarm topics (tests use it too).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import suppress
from typing import Any

Client = Callable[[str], Any]


def subscribe_a_queue(client: Client, topic_arn: str, queue_name: str) -> str:
    """A queue subscribed to `topic_arn` (SNS envelope kept: RawMessageDelivery false); its URL.
    moto and AWS confirm an SQS subscription of the same account at once."""
    sqs, sns = client("sqs"), client("sns")
    url: str = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "false"})
    return url


def drain_notifications(client: Client, url: str, most: int = 500) -> list[dict[str, Any]]:
    """The alarm notifications waiting in the inbox (CloudWatch's JSON message), oldest first, at
    most `most` of them (a look, not an endless loop while alarms keep notifying), removed from it."""
    sqs = client("sqs")
    found: list[dict[str, Any]] = []
    while len(found) < most and (batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])):
        for message in batch:
            with suppress(json.JSONDecodeError, KeyError, TypeError):  # else not a notification a pager acts on
                found.append(json.loads(json.loads(message["Body"])["Message"]))
        sqs.delete_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)]
        )
    return found
