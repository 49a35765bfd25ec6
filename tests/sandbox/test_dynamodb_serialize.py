"""sandbox.seams.dynamodb_wire: DynamoDB responses byte for byte as moto's own serializer writes
them, for every attribute type, nested or not, through every read operation."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from moto import mock_aws

from sandbox import seams
from sandbox.seams import dynamodb_wire

ITEM = {
    "pk": {"S": "a"}, "sk": {"N": "1"}, "s": {"S": ""}, "n": {"N": "-1.50"}, "b": {"B": b"\x00\x01"},
    "ss": {"SS": ["x", "y"]}, "ns": {"NS": ["1", "2.5"]}, "bs": {"BS": [b"a", b"b"]},
    "m": {"M": {"in": {"S": "v"}, "l": {"L": [{"N": "3"}, {"NULL": True}, {"BOOL": False}, {"M": {}}]}}},
    "t": {"BOOL": True}, "z": {"NULL": True}, "e": {"L": []}, "u": {"S": "ünïcode ✓"},
    "mb": {"M": {"bin": {"B": b"x"}, "l": {"L": [{"S": "q"}, {"BS": [b"z"]}]}}},
}


def reads() -> list[Any]:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    ddb.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "N"}],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.put_item(TableName="t", Item=ITEM)
    ddb.update_item(TableName="t", Key={"pk": {"S": "a"}, "sk": {"N": "1"}}, UpdateExpression="ADD n :one",
                    ExpressionAttributeValues={":one": {"N": "2"}})
    key = {"pk": {"S": "a"}, "sk": {"N": "1"}}
    return [
        ddb.get_item(TableName="t", Key=key)["Item"],
        ddb.query(TableName="t", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "a"}})["Items"],
        ddb.scan(TableName="t")["Items"],
        ddb.batch_get_item(RequestItems={"t": {"Keys": [key]}})["Responses"],
        ddb.update_item(TableName="t", Key=key, UpdateExpression="SET s = :s", ReturnValues="ALL_NEW",
                        ExpressionAttributeValues={":s": {"S": "w"}})["Attributes"],
    ]


def test_responses_are_what_moto_writes(aws_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    with mock_aws():
        plain = reads()
    written: list[str] = []
    original = dynamodb_wire._as_moto_writes
    monkeypatch.setattr(dynamodb_wire, "_as_moto_writes", lambda kind, inner: written.append(kind) or original(kind, inner))
    seams.install()
    try:
        with mock_aws():
            seamed = reads()
    finally:
        seams.uninstall()
    assert seamed == plain
    assert {"S", "N", "SS", "NS", "BOOL", "NULL"} <= set(written)  # written as kept, not walked (nested too)
    assert seamed[0]["n"] == {"N": "0.50"} and seamed[0]["b"] == {"B": b"\x00\x01"}
