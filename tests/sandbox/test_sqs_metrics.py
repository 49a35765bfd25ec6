"""The sandbox publishes the AWS/SQS metrics moto lacks, as AWS names them."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto import mock_aws

from sandbox.clock import TimeScale
from sandbox.sqs_metrics import SqsMetricsPublisher

REGION = "us-east-1"


@pytest.fixture
def moto_env(monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        yield


def latest(cloudwatch, name: str, queue: str) -> float:
    now = datetime.now(UTC)
    points = cloudwatch.get_metric_statistics(
        Namespace="AWS/SQS",
        MetricName=name,
        Dimensions=[{"Name": "QueueName", "Value": queue}],
        StartTime=now - timedelta(minutes=5),
        EndTime=now + timedelta(minutes=1),
        Period=60,
        Statistics=["Maximum"],
    )["Datapoints"]
    assert points, f"no {name} datapoint"
    return max(p["Maximum"] for p in points)


def test_age_of_the_oldest_message_and_counts_are_published_per_queue(moto_env) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="work")["QueueUrl"]
    sqs.create_queue(QueueName="idle")
    sqs.send_message(QueueUrl=url, MessageBody="first")
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=60)
    time.sleep(0.2)
    SqsMetricsPublisher(region=REGION, time_scale=TimeScale(0.1)).publish_once()
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    assert latest(cloudwatch, "ApproximateAgeOfOldestMessage", "work") >= 2.0  # 0.2 s real = 2 s virtual
    assert latest(cloudwatch, "ApproximateNumberOfMessagesVisible", "work") == 1
    assert latest(cloudwatch, "ApproximateNumberOfMessagesDelayed", "work") == 1
    assert latest(cloudwatch, "ApproximateAgeOfOldestMessage", "idle") == 0
