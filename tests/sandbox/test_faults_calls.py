"""A handler's AWS calls under injected faults (`sandbox.seams.handler_calls`), on moto in-process:
a throttle is answered as the service answers it, so botocore retries it as a throttle and the
caller then gets AWS's error; a crash around a call kills the caller whatever it catches; the
sandbox's own calls and calls outside a handler are never faulted; clearing restores the calls."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from sandbox.clients import sandbox_client
from sandbox.faults import ApiFault, CallCrash, FaultBoard
from sandbox.runtime import _RUNNING, RunningFunction
from sandbox.seams import handler_calls
from sandbox.seams.handler_calls import InjectedCrash

TABLE = "things"


@pytest.fixture
def board(aws: None) -> Iterator[FaultBoard]:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    ddb.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    board = FaultBoard(on_first_call_fault=handler_calls.SEAM.attach)
    yield board
    board.close()
    handler_calls.SEAM.detach(board)


@pytest.fixture
def as_handler() -> Iterator[None]:
    """This thread runs a handler of the function `router` (as the runtime marks a worker)."""
    token = _RUNNING.set(RunningFunction("router", "arn:aws:lambda:us-east-1:123456789012:function:router", "", "r1"))
    yield
    _RUNNING.reset(token)


def client(attempts: int = 4) -> Any:
    config = Config(retries={"total_max_attempts": attempts, "mode": "standard"})
    return boto3.client("dynamodb", region_name="us-east-1", config=config)


def put(ddb: Any) -> dict[str, Any]:
    return ddb.put_item(TableName=TABLE, Item={"k": {"S": "a"}})  # type: ignore[no-any-return]


def test_a_throttled_call_is_retried_by_botocore_then_fails_with_aws_error(board: FaultBoard, as_handler: None) -> None:
    board.inject(ApiFault(name="throttled", service="dynamodb", code="ProvisionedThroughputExceededException"))
    ddb = client(attempts=4)
    with pytest.raises(ClientError) as raised:
        put(ddb)
    error = raised.value.response
    assert error["Error"]["Code"] == "ProvisionedThroughputExceededException"
    assert isinstance(raised.value, ddb.exceptions.ProvisionedThroughputExceededException)
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert error["ResponseMetadata"]["RetryAttempts"] == 3, "botocore saw a throttle and retried it"
    assert board.active()[0]["faulted"] == 4
    # AWS counts the throttled write where the alarms read it.
    stats = boto3.client("cloudwatch", region_name="us-east-1").get_metric_statistics(
        Namespace="AWS/DynamoDB", MetricName="WriteThrottleEvents", Dimensions=[{"Name": "TableName", "Value": TABLE}],
        StartTime="2000-01-01T00:00:00Z", EndTime="2100-01-01T00:00:00Z", Period=86400, Statistics=["Sum"],
    )["Datapoints"]
    assert sum(point["Sum"] for point in stats) == 4
    board.clear("throttled")
    assert put(ddb)["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_a_share_of_throttles_is_absorbed_by_the_retries(board: FaultBoard, as_handler: None) -> None:
    board.inject(ApiFault(name="some", service="dynamodb", operation="PutItem", code="ThrottlingException", share=0.5))
    answer = put(client())
    assert answer["ResponseMetadata"]["RetryAttempts"] == 1, "the first attempt throttled, the second went through"
    assert boto3.client("dynamodb", region_name="us-east-1").get_item(TableName=TABLE, Key={"k": {"S": "a"}})["Item"]


def test_only_handlers_calls_are_faulted(board: FaultBoard) -> None:
    board.inject(ApiFault(name="throttled", service="dynamodb"))
    assert put(client())["ResponseMetadata"]["RetryAttempts"] == 0  # outside a handler: the CLI, a test
    token = _RUNNING.set(RunningFunction("tracker", "arn", "", "r2"))
    try:
        assert put(sandbox_client("dynamodb", "us-east-1", None))["ResponseMetadata"]["HTTPStatusCode"] == 200
        board.inject(ApiFault(name="throttled", service="dynamodb", callers=("router",)))
        assert put(client())["ResponseMetadata"]["RetryAttempts"] == 0  # another function's calls
    finally:
        _RUNNING.reset(token)


def test_a_crash_before_a_call_sends_nothing_and_after_it_loses_the_answer(board: FaultBoard, as_handler: None) -> None:
    ddb = client()
    board.inject(CallCrash(name="before", function="router", service="dynamodb", operation="PutItem", when="before"))
    with pytest.raises(InjectedCrash):
        try:
            put(ddb)
        except Exception:  # a handler's catch-all does not catch a crash
            pytest.fail("the crash was caught as an exception")
    reader = boto3.client("dynamodb", region_name="us-east-1")
    assert "Item" not in reader.get_item(TableName=TABLE, Key={"k": {"S": "a"}}), "the call was sent"
    board.clear()
    board.inject(CallCrash(name="after", function="router", service="dynamodb", operation="PutItem", when="after"))
    with pytest.raises(InjectedCrash, match="died after dynamodb:PutItem"):
        put(ddb)
    assert reader.get_item(TableName=TABLE, Key={"k": {"S": "a"}})["Item"], "the call was made before the crash"
    board.clear()
    assert put(ddb)["ResponseMetadata"]["HTTPStatusCode"] == 200
