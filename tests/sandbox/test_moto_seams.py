"""sandbox.moto_seams: moto made to behave as AWS where the sandbox relies on it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.dynamodb.models import DynamoDBBackend

from sandbox import moto_seams

REGION = "us-east-1"
TABLE = "seams"
THREADS = 8
PAIRS = 150


@pytest.fixture
def table(aws_env: None) -> Iterator[Any]:
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        ddb.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield ddb


def acquire_release_pairs(ddb: Any, holder: str, failures: list[str]) -> None:
    """The semaphore's shape: one holder attribute and the count, changed together, conditionally."""
    key = {"pk": {"S": "semaphore"}}
    for _ in range(PAIRS):
        try:
            ddb.update_item(
                TableName=TABLE,
                Key=key,
                UpdateExpression="SET #h = :now ADD active_count :one",
                ConditionExpression="attribute_not_exists(#h)",
                ExpressionAttributeNames={"#h": f"h#{holder}"},
                ExpressionAttributeValues={":now": {"S": "t"}, ":one": {"N": "1"}},
            )
            ddb.update_item(
                TableName=TABLE,
                Key=key,
                UpdateExpression="REMOVE #h ADD active_count :minus",
                ConditionExpression="attribute_exists(#h)",
                ExpressionAttributeNames={"#h": f"h#{holder}"},
                ExpressionAttributeValues={":minus": {"N": "-1"}},
            )
        except Exception as exc:  # a condition that failed means an update was lost
            failures.append(f"{holder}: {type(exc).__name__}")


def test_concurrent_conditional_writes_to_one_item_lose_nothing(table: Any) -> None:
    moto_seams.install()
    try:
        failures: list[str] = []
        threads = [
            threading.Thread(target=acquire_release_pairs, args=(table, f"x{i}", failures)) for i in range(THREADS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        moto_seams.uninstall()
    item = table.get_item(TableName=TABLE, Key={"pk": {"S": "semaphore"}}, ConsistentRead=True)["Item"]
    assert failures == []
    assert item["active_count"] == {"N": "0"}
    assert [name for name in item if name.startswith("h#")] == []


def test_the_seams_wrap_what_moto_has_and_come_off_again() -> None:
    originals = {name: DynamoDBBackend.__dict__[name] for name in moto_seams.DYNAMODB_ITEM_OPERATIONS}
    moto_seams.install()
    moto_seams.install()
    try:
        assert all(
            getattr(DynamoDBBackend.__dict__[name], "__pipeops_seam__", False)
            for name in moto_seams.DYNAMODB_ITEM_OPERATIONS
        )
    finally:
        moto_seams.uninstall()
    assert moto_seams.installed()  # installed twice: still on after one uninstall
    moto_seams.uninstall()
    assert {name: DynamoDBBackend.__dict__[name] for name in originals} == originals
    assert not moto_seams.installed()
