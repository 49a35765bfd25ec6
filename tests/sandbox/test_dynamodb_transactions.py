"""sandbox.seams.dynamodb_transactions: a transaction backs up the items it names, not its tables, and
answers and leaves the tables exactly as moto's own would."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from sandbox import seams

REGION = "us-east-1"
TABLES = ("runs", "claims")
KEYS = ("a", "b", "c")


def _create_tables(ddb: Any) -> None:
    ddb.create_table(
        TableName="runs",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.create_table(
        TableName="claims",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


@pytest.fixture
def ddb(aws_env: None) -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        _create_tables(client)
        seams.install()
        try:
            yield client
        finally:
            seams.uninstall()


def key(table: str, name: str) -> dict[str, Any]:
    return {"pk": {"S": name}, "sk": {"S": "0"}} if table == "runs" else {"pk": {"S": name}}


def everything(client: Any) -> dict[str, list[dict[str, Any]]]:
    return {
        table: sorted(client.scan(TableName=table, ConsistentRead=True)["Items"], key=lambda i: i["pk"]["S"])
        for table in TABLES
    }


def test_a_refused_transaction_leaves_every_item_it_named_as_it_was(ddb: Any) -> None:
    ddb.put_item(TableName="runs", Item=key("runs", "a") | {"n": {"N": "1"}, "tag": {"S": "kept"}})
    ddb.put_item(TableName="claims", Item=key("claims", "b") | {"owner": {"S": "x"}})
    before = everything(ddb)
    with pytest.raises(ClientError) as refused:
        ddb.transact_write_items(
            TransactItems=[
                {"Update": {"TableName": "runs", "Key": key("runs", "a"), "UpdateExpression": "SET n = :two REMOVE tag",
                            "ExpressionAttributeValues": {":two": {"N": "2"}}}},
                {"Delete": {"TableName": "claims", "Key": key("claims", "b")}},
                {"Put": {"TableName": "claims", "Item": key("claims", "new") | {"owner": {"S": "y"}}}},
                {"ConditionCheck": {"TableName": "runs", "Key": key("runs", "c"),
                                    "ConditionExpression": "attribute_exists(pk)"}},
            ]
        )
    assert refused.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert everything(ddb) == before


def test_an_accepted_transaction_writes_every_item(ddb: Any) -> None:
    ddb.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": "claims", "Item": key("claims", "a") | {"owner": {"S": "y"}},
                     "ConditionExpression": "attribute_not_exists(pk)"}},
            {"Update": {"TableName": "runs", "Key": key("runs", "a"), "UpdateExpression": "ADD n :one",
                        "ExpressionAttributeValues": {":one": {"N": "1"}}}},
        ]
    )
    state = everything(ddb)
    assert state["claims"] == [key("claims", "a") | {"owner": {"S": "y"}}]
    assert state["runs"] == [key("runs", "a") | {"n": {"N": "1"}}]


def test_moto_no_longer_copies_whole_tables_but_still_copies_items(ddb: Any) -> None:
    from moto.dynamodb import models
    from moto.dynamodb.models.table import Table

    table = next(iter(models.dynamodb_backends["123456789012"][REGION].tables.values()))
    assert isinstance(table, Table) and models.copy.deepcopy(table) is table
    item = {"a": [1, 2]}
    copied = models.copy.deepcopy(item)
    assert copied == item and copied is not item and copied["a"] is not item["a"]
    seams.uninstall()
    try:
        assert models.copy.deepcopy(table) is not table  # moto's own, once the seams are off
    finally:
        seams.install()


# -- the same transactions with and without the seam leave the same tables ---------------------

_OPERATIONS = st.sampled_from(["Put", "Update", "Delete", "ConditionCheck"])
_CONDITIONS = st.sampled_from([None, "attribute_exists(pk)", "attribute_not_exists(pk)"])
_ENTRY = st.tuples(_OPERATIONS, st.sampled_from(TABLES), st.sampled_from(KEYS), _CONDITIONS, st.integers(0, 9))
_TRANSACTION = st.lists(_ENTRY, min_size=1, max_size=4, unique_by=lambda e: (e[1], e[2]))


def _request(operation: str, table: str, name: str, condition: str | None, value: int) -> dict[str, Any]:
    request: dict[str, Any] = {"TableName": table}
    if operation == "Put":
        request["Item"] = key(table, name) | {"v": {"N": str(value)}}
    else:
        request["Key"] = key(table, name)
    if operation == "Update":
        request |= {"UpdateExpression": "SET v = :v", "ExpressionAttributeValues": {":v": {"N": str(value)}}}
    if condition or operation == "ConditionCheck":
        request["ConditionExpression"] = condition or "attribute_exists(pk)"
    return {operation: request}


def _apply(client: Any, transactions: list[list[tuple[str, str, str, str | None, int]]]) -> list[str]:
    answers = []
    for transaction in transactions:
        try:
            client.transact_write_items(TransactItems=[_request(*entry) for entry in transaction])
            answers.append("ok")
        except ClientError as exc:
            answers.append(exc.response["Error"]["Code"])
    return answers


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(transactions=st.lists(_TRANSACTION, min_size=1, max_size=6))
def test_with_or_without_the_seam_the_same_answers_and_tables(aws_env: None, transactions: list) -> None:
    outcomes = []
    for with_seams in (False, True):
        with mock_aws():
            client = boto3.client("dynamodb", region_name=REGION)
            _create_tables(client)
            if with_seams:
                seams.install()
            try:
                outcomes.append((_apply(client, transactions), everything(client)))
            finally:
                if with_seams:
                    seams.uninstall()
    assert outcomes[0] == outcomes[1]
