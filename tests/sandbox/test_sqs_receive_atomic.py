"""sandbox.seams.sqs_receive_atomic: concurrent receivers of one queue, as AWS answers them."""

from __future__ import annotations

import json
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from sandbox import seams

REGION = "us-east-1"
RECEIVERS = 8
MESSAGES = 60
SWITCH_INTERVAL = 1e-5  # interleave the threads' calls finely: a race shows at once


@pytest.fixture
def sqs(aws_env: None) -> Iterator[Any]:
    with mock_aws():
        seams.install()
        try:
            yield boto3.client("sqs", region_name=REGION)
        finally:
            seams.uninstall()


def queue_with_dlq(sqs: Any, max_receive_count: int) -> tuple[str, str]:
    dlq = sqs.create_queue(QueueName="atomic-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive_count})
    url = sqs.create_queue(QueueName="atomic", Attributes={"RedrivePolicy": policy})["QueueUrl"]
    for start in range(0, MESSAGES, 10):
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{start + i}"} for i in range(10)])
    return url, dlq


def at_once(receive: Callable[[], list[str]]) -> tuple[list[str], list[BaseException]]:
    """RECEIVERS threads receiving until the queue shows them nothing; what each got, and errors."""
    received: list[str] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(RECEIVERS)

    def receiver() -> None:
        barrier.wait()
        try:
            while batch := receive():
                received.extend(batch)
        except BaseException as exc:  # surfaced by the caller
            errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        threads = [threading.Thread(target=receiver) for _ in range(RECEIVERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    finally:
        sys.setswitchinterval(interval)
    return received, errors


def test_receivers_at_once_are_each_handed_a_message_no_other_holds(sqs: Any) -> None:
    url, _ = queue_with_dlq(sqs, max_receive_count=5)

    def receive() -> list[str]:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=300).get("Messages", [])
        return [m["Body"] for m in messages]

    received, errors = at_once(receive)
    assert errors == []
    assert Counter(received) == Counter(f"m{i}" for i in range(MESSAGES))  # every one, each once


def test_receivers_at_once_move_each_spent_message_to_the_dlq_once_without_an_error(sqs: Any) -> None:
    url, dlq = queue_with_dlq(sqs, max_receive_count=1)
    first = 0
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0).get("Messages", []):
        first += len(batch)  # one receive each, handed back at once: the next receive moves them
        if first >= MESSAGES:
            break

    def receive() -> list[str]:
        return [m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])]

    received, errors = at_once(receive)
    assert errors == [] and received == []
    moved = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
    assert int(moved["ApproximateNumberOfMessages"]) == MESSAGES
