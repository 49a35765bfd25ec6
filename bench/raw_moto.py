"""Raw moto throughput, in-process: the floor under everything the sandbox does.

The same four operations as an earlier reference measurement of moto 5.2.5 on 2 cores, plus the cost of building a
boto3 client (moto's ASL interpreter builds one per Task state; the sandbox now reuses them,
sandbox.seams). Each measurement runs a fixed number of operations on a fresh `mock_aws` and
reports operations (or messages) per second.

These are isolated operations, in units of their own: no ratio to the sandbox can be read from
them. `bench.sandbox_ratio` computes that ratio in one run (the handlers' recorded calls replayed
on bare moto).
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from moto.core.config import DefaultConfig

REGION = "us-east-1"
EXECUTING: DefaultConfig = {"stepfunctions": {"execute_state_machine": True}}
PASS_MACHINE = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}})
ROLE = "arn:aws:iam::123456789012:role/bench"

@dataclass(frozen=True)
class Measurement:
    key: str
    operation: str
    unit: str  # what the rate counts: "ops/s", "msg/s", "ms"
    count: int  # operations per sample


def _client(service: str) -> Any:
    import boto3

    return boto3.session.Session().client(service, region_name=REGION)  # type: ignore[call-overload]  # a service named at run time: the stubs type literal names only


def dynamodb_conditional_update(count: int) -> float:
    """Conditional update_item on one item (the semaphore's shape): updates per second."""
    ddb = _client("dynamodb")
    table = f"bench-{uuid.uuid4().hex[:8]}"
    ddb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.put_item(TableName=table, Item={"pk": {"S": "counter"}, "n": {"N": "0"}})
    started = time.perf_counter()
    for _ in range(count):
        ddb.update_item(
            TableName=table,
            Key={"pk": {"S": "counter"}},
            UpdateExpression="SET #n = #n + :one",
            ConditionExpression="attribute_exists(pk) AND #n < :limit",
            ExpressionAttributeNames={"#n": "n"},
            ExpressionAttributeValues={":one": {"N": "1"}, ":limit": {"N": str(10 * count)}},
        )
    return count / (time.perf_counter() - started)


def sqs_send_receive_delete(count: int) -> float:
    """One message at a time: send, receive, delete. Messages per second."""
    sqs = _client("sqs")
    url = sqs.create_queue(QueueName=f"bench-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    started = time.perf_counter()
    for i in range(count):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
        received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]
        sqs.delete_message(QueueUrl=url, ReceiptHandle=received[0]["ReceiptHandle"])
    return count / (time.perf_counter() - started)


def sqs_batches_of_10(count: int) -> float:
    """send_message_batch(10), receive up to 10, delete_message_batch: messages per second."""
    sqs = _client("sqs")
    url = sqs.create_queue(QueueName=f"bench-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    batches = max(1, count // 10)
    moved = 0
    started = time.perf_counter()
    for b in range(batches):
        entries = [{"Id": str(i), "MessageBody": f"m{b}-{i}"} for i in range(10)]
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
        pending = 10
        while pending:
            messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            if messages:
                sqs.delete_message_batch(
                    QueueUrl=url,
                    Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
                )
            pending -= len(messages)
            moved += len(messages)
    return moved / (time.perf_counter() - started)


def start_execution(count: int) -> float:
    """start_execution on a one-state Pass machine (executions run for real): starts per second."""
    sfn = _client("stepfunctions")
    arn = sfn.create_state_machine(name=f"bench-{uuid.uuid4().hex[:8]}", definition=PASS_MACHINE, roleArn=ROLE)[
        "stateMachineArn"
    ]
    started = time.perf_counter()
    for i in range(count):
        sfn.start_execution(stateMachineArn=arn, name=f"e{i}", input="{}")
    rate = count / (time.perf_counter() - started)
    _drain(sfn, arn)
    return rate


def client_creation(count: int) -> float:
    """Milliseconds to build one boto3 client (a fresh session each time, as the ASL interpreter does)."""
    import boto3

    started = time.perf_counter()
    for _ in range(count):
        boto3.client("dynamodb", region_name=REGION, aws_access_key_id="ak", aws_secret_access_key="sk")
    return (time.perf_counter() - started) / count * 1000


def _drain(sfn: Any, arn: str, timeout: float = 30.0) -> None:
    """Executions run on threads that outlive the mock: wait for them before leaving it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = sfn.list_executions(stateMachineArn=arn, statusFilter="RUNNING")["executions"]
        if not running:
            return
        time.sleep(0.05)


MEASUREMENTS: tuple[tuple[Measurement, Callable[[int], float]], ...] = (
    (Measurement("dynamodb_conditional_update", "DynamoDB conditional update_item", "ops/s", 400), dynamodb_conditional_update),
    (Measurement("sqs_send_receive_delete", "SQS send + receive + delete (1 message)", "msg/s", 250), sqs_send_receive_delete),
    (Measurement("sqs_batches_of_10", "SQS 10-message batches (send, receive, delete)", "msg/s", 600), sqs_batches_of_10),
    (Measurement("start_execution", "Step Functions start_execution (Pass machine)", "ops/s", 150), start_execution),
    (Measurement("client_creation", "boto3 client creation (new session)", "ms", 40), client_creation),
)


def run(repeats: int = 3, scale: float = 1.0) -> list[dict[str, Any]]:
    """Each measurement `repeats` times on a fresh mock; `scale` shrinks the operation counts."""
    from moto import mock_aws

    results: list[dict[str, Any]] = []
    for measurement, function in MEASUREMENTS:
        count = max(10, int(measurement.count * scale))
        samples: list[float] = []
        for _ in range(repeats):
            with mock_aws(config=EXECUTING):
                samples.append(function(count))
        results.append(
            {
                "key": measurement.key,
                "operation": measurement.operation,
                "unit": measurement.unit,
                "count": count,
                "samples": samples,
                "median": statistics.median(samples),
            }
        )
    return results
