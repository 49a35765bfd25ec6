"""sandbox.seams.limits: AWS's size limits enforced in moto (256 KiB Step Functions payloads, 400 KB items).

Each limit is pinned twice: what moto does without the patch is what docs/ARCHITECTURE.md#what-moto-does-not-do says (so a
moto upgrade that changes it is noticed), and with the patch the limit fires exactly at AWS's
bound, with AWS's error, leaving nothing half-written.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from sandbox import seams
from sandbox.seams import limits
from tests.conftest import create_pk_table

REGION = "us-east-1"
ROLE = "arn:aws:iam::123456789012:role/workflow"
TABLE = "limits"
LIMIT = 262_144


@pytest.fixture
def enforced() -> Iterator[None]:
    limits.install()
    try:
        yield
    finally:
        limits.uninstall()


@pytest.fixture
def aws(aws_env: None) -> Iterator[dict[str, Any]]:
    logging.getLogger("moto.stepfunctions.parser").setLevel(logging.CRITICAL)
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        ddb = boto3.client("dynamodb", region_name=REGION)
        create_pk_table(ddb, TABLE)
        sfn = boto3.client("stepfunctions", region_name=REGION)
        yield {"ddb": ddb, "sfn": sfn}
        _drain(sfn)


def _drain(sfn: Any) -> None:
    deadline = time.monotonic() + 10
    for machine in sfn.list_state_machines()["stateMachines"]:
        arn = machine["stateMachineArn"]
        while sfn.list_executions(stateMachineArn=arn, statusFilter="RUNNING")["executions"]:
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)


def run(sfn: Any, definition: dict[str, Any], execution_input: str, name: str) -> dict[str, Any]:
    machine = sfn.create_state_machine(name=name, definition=json.dumps(definition), roleArn=ROLE)["stateMachineArn"]
    arn = sfn.start_execution(stateMachineArn=machine, name=name, input=execution_input)["executionArn"]
    deadline = time.monotonic() + 20
    while (described := sfn.describe_execution(executionArn=arn))["status"] == "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return described


def json_of_size(size: int, field: str = "a") -> str:
    """A JSON object of exactly `size` UTF-8 bytes (compact), with a 2-byte character inside."""
    head, tail = '{"' + field + '":"é', '"}'
    text = head + "x" * (size - len((head + tail).encode()) ) + tail
    assert len(text.encode()) == size
    return text


PASS = {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}


# --------------------------------------------------------------------------- sizes


def test_item_size_counts_as_aws_documents() -> None:
    assert limits.item_size({"pk": {"S": "ab"}}) == 4
    assert limits.item_size({"n": {"N": "12345"}}) == 1 + 4  # (5 digits + 1) // 2 + 1
    assert limits.item_size({"n": {"N": "100.000"}}) == 1 + 2  # trailing zeros trimmed
    assert limits.item_size({"b": {"BOOL": True}, "z": {"NULL": True}}) == 4
    assert limits.item_size({"s": {"SS": ["ab", "é"]}}) == 1 + 4
    assert limits.item_size({"l": {"L": [{"S": "ab"}, {"S": "c"}]}}) == 1 + 3 + (2 + 1) + (1 + 1)
    assert limits.item_size({"m": {"M": {"k": {"S": "v"}}}}) == 1 + 3 + (1 + 1 + 1)
    assert limits.payload_size({"a": "é"}) == len('{"a":"é"}'.encode())


# --------------------------------------------------------------------------- Step Functions


def test_moto_alone_lets_an_oversized_execution_input_start(aws: dict[str, Any]) -> None:
    described = run(aws["sfn"], PASS, json_of_size(LIMIT + 1), "moto-alone")
    # accepted by StartExecution; only its first state fails
    assert described["status"] == "FAILED" and described["error"] == "States.DataLimitExceeded"


def test_start_execution_refuses_an_input_over_256_kib(aws: dict[str, Any], enforced: None) -> None:
    sfn = aws["sfn"]
    machine = sfn.create_state_machine(name="input", definition=json.dumps(PASS), roleArn=ROLE)["stateMachineArn"]
    with pytest.raises(ClientError) as refused:
        sfn.start_execution(stateMachineArn=machine, name="over", input=json_of_size(LIMIT + 1))
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "262144" in refused.value.response["Error"]["Message"]
    assert sfn.list_executions(stateMachineArn=machine)["executions"] == []
    # exactly 256 KiB is allowed (moto alone refuses it in the first state: `<`, not `<=`)
    assert run(sfn, PASS, json_of_size(LIMIT), "exact")["status"] == "SUCCEEDED"


def test_a_state_output_over_the_limit_fails_the_execution_past_a_catch_all(
    aws: dict[str, Any], enforced: None
) -> None:
    definition = {
        "StartAt": "Grow",
        "States": {
            "Grow": {
                "Type": "Pass",
                "Parameters": {"copy.$": "$.a", "more.$": "$.a"},
                "ResultPath": "$.grown",
                "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Caught"}],
                "Next": "Done",
            },
            "Caught": {"Type": "Succeed"},
            "Done": {"Type": "Succeed"},
        },
    }
    described = run(aws["sfn"], definition, json_of_size(100_000), "grow")
    assert described["status"] == "FAILED"
    assert described["error"] == "States.DataLimitExceeded"


def map_of_big_results(catch: list[str]) -> dict[str, Any]:
    return {
        "StartAt": "M",
        "States": {
            "M": {
                "Type": "Map",
                "ItemsPath": "$.items",
                "ItemProcessor": {
                    "ProcessorConfig": {"Mode": "INLINE"},
                    "StartAt": "I",
                    "States": {"I": {"Type": "Pass", "Result": "y" * 2000, "End": True}},
                },
                "ResultPath": "$.results",
                "Retry": [{"ErrorEquals": catch, "MaxAttempts": 1, "IntervalSeconds": 1}],
                "Catch": [{"ErrorEquals": catch, "Next": "Caught"}],
                "End": True,
            },
            "Caught": {"Type": "Succeed"},
        },
    }


def test_a_map_whose_results_exceed_the_limit_fails_uncaught(aws: dict[str, Any], enforced: None) -> None:
    described = run(aws["sfn"], map_of_big_results(["States.ALL"]), json.dumps({"items": list(range(200))}), "map")
    assert (described["status"], described["error"]) == ("FAILED", "States.DataLimitExceeded")
    # the Map drops its results: nothing is over the limit, the same items pass
    small = map_of_big_results(["States.ALL"])
    small["States"]["M"]["ResultPath"] = None
    assert run(aws["sfn"], small, json.dumps({"items": list(range(200))}), "dropped")["status"] == "SUCCEEDED"


def test_a_state_input_over_the_limit_fails_when_the_state_is_entered(aws: dict[str, Any], enforced: None) -> None:
    """A Map item built by ItemSelector is the input of the item's first state."""
    definition = {
        "StartAt": "M",
        "States": {
            "M": {
                "Type": "Map",
                "ItemsPath": "$.items",
                "ItemSelector": {"big.$": "$.big", "again.$": "$.big", "item.$": "$$.Map.Item.Value"},
                "ItemProcessor": {
                    "ProcessorConfig": {"Mode": "INLINE"},
                    "StartAt": "I",
                    "States": {"I": {"Type": "Pass", "Result": "small", "End": True}},
                },
                "ResultPath": None,
                "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Caught"}],
                "End": True,
            },
            "Caught": {"Type": "Succeed"},
        },
    }
    execution_input = json.dumps({"items": [1], "big": "x" * 140_000})
    described = run(aws["sfn"], definition, execution_input, "item-input")
    assert (described["status"], described["error"]) == ("FAILED", "States.DataLimitExceeded")


def test_states_all_still_catches_everything_else(aws: dict[str, Any], enforced: None) -> None:
    definition = map_of_big_results(["States.ALL"])
    definition["States"]["M"]["ItemProcessor"]["States"]["I"] = {"Type": "Fail", "Error": "Custom.Boom"}
    assert run(aws["sfn"], definition, json.dumps({"items": [1]}), "catch-all")["status"] == "SUCCEEDED"


# --------------------------------------------------------------------------- DynamoDB


def big_set(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{index:05d}" + "x" * 1000 for index in range(count)]


def test_moto_alone_lets_an_item_grow_past_400_kb(aws: dict[str, Any]) -> None:
    ddb = aws["ddb"]
    ddb.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "s": {"SS": big_set("k", 300)}})
    ddb.update_item(
        TableName=TABLE, Key={"pk": {"S": "a"}}, UpdateExpression="ADD s :v",
        ExpressionAttributeValues={":v": {"SS": big_set("z", 200)}},
    )
    item = ddb.get_item(TableName=TABLE, Key={"pk": {"S": "a"}})["Item"]
    assert limits.item_size(item) > limits.MAX_ITEM_BYTES


def test_put_item_over_400_kb_is_refused(aws: dict[str, Any], enforced: None) -> None:
    ddb = aws["ddb"]
    fits = {"pk": {"S": "a"}, "v": {"S": "x" * (limits.MAX_ITEM_BYTES - 4)}}
    assert limits.item_size(fits) == limits.MAX_ITEM_BYTES
    ddb.put_item(TableName=TABLE, Item=fits)
    over = {"pk": {"S": "b"}, "big": {"L": [{"S": "x" * 99}] * 4096}}  # strings fit; list overhead does not
    assert limits.item_size(over) == 409_609 > limits.MAX_ITEM_BYTES > 3 + 3 + 99 * 4096
    with pytest.raises(ClientError) as refused:
        ddb.put_item(TableName=TABLE, Item=over)
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert refused.value.response["Error"]["Message"] == limits.PUT_TOO_LARGE
    assert "Item" not in ddb.get_item(TableName=TABLE, Key={"pk": {"S": "b"}})


def test_update_item_that_would_pass_400_kb_is_refused_and_changes_nothing(aws: dict[str, Any], enforced: None) -> None:
    ddb = aws["ddb"]
    ddb.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "s": {"SS": big_set("k", 300)}})
    with pytest.raises(ClientError) as refused:
        ddb.update_item(
            TableName=TABLE, Key={"pk": {"S": "a"}}, UpdateExpression="ADD s :v SET n = :n",
            ExpressionAttributeValues={":v": {"SS": big_set("z", 200)}, ":n": {"N": "1"}},
        )
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert refused.value.response["Error"]["Message"] == limits.UPDATE_TOO_LARGE
    item = ddb.get_item(TableName=TABLE, Key={"pk": {"S": "a"}})["Item"]
    assert len(item["s"]["SS"]) == 300 and "n" not in item
    # growing within the limit still works
    ddb.update_item(
        TableName=TABLE, Key={"pk": {"S": "a"}}, UpdateExpression="ADD s :v",
        ExpressionAttributeValues={":v": {"SS": big_set("z", 50)}},
    )


def test_a_transaction_with_an_item_over_400_kb_is_cancelled_whole(aws: dict[str, Any], enforced: None) -> None:
    ddb = aws["ddb"]
    ddb.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "s": {"SS": big_set("k", 300)}})
    with pytest.raises(ClientError) as refused:
        ddb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "other"}}}},
                {
                    "Update": {
                        "TableName": TABLE, "Key": {"pk": {"S": "a"}}, "UpdateExpression": "ADD s :v",
                        "ExpressionAttributeValues": {":v": {"SS": big_set("z", 200)}},
                    }
                },
            ]
        )
    assert refused.value.response["Error"]["Code"] == "TransactionCanceledException"
    reasons = refused.value.response["CancellationReasons"]
    assert [r["Code"] for r in reasons] == ["None", "ValidationError"]
    assert reasons[1]["Message"] == limits.UPDATE_TOO_LARGE
    assert "Item" not in ddb.get_item(TableName=TABLE, Key={"pk": {"S": "other"}})
    assert len(ddb.get_item(TableName=TABLE, Key={"pk": {"S": "a"}})["Item"]["s"]["SS"]) == 300
    with pytest.raises(ClientError) as put_refused:
        ddb.transact_write_items(
            TransactItems=[{"Put": {"TableName": TABLE, "Item": {"pk": {"S": "c"}, "v": {"S": "x" * limits.MAX_ITEM_BYTES}}}}]
        )
    assert [r["Code"] for r in put_refused.value.response["CancellationReasons"]] == ["ValidationError"]


def test_limits_hold_with_the_atomic_seams_stacked_either_way(aws: dict[str, Any]) -> None:
    ddb = aws["ddb"]
    over = {"pk": {"S": "b"}, "v": {"S": "x" * limits.MAX_ITEM_BYTES}}
    for first, second in ((seams, limits), (limits, seams)):
        first.install()
        second.install()
        try:
            with pytest.raises(ClientError, match="maximum allowed size"):
                ddb.put_item(TableName=TABLE, Item=over)
        finally:
            second.uninstall()
            first.uninstall()
    assert not limits.installed() and not seams.installed()


# --------------------------------------------------------------------------- install / uninstall


def test_the_patches_wrap_what_moto_has_and_come_off_again() -> None:
    from moto.stepfunctions.parser.asl.component.state import state as state_module

    patched = [(patch.owner, patch.name) for patch in limits._patches()]
    originals = {(owner, name): owner.__dict__[name] for owner, name in patched}
    quota = state_module.is_within_size_quota
    limits.install()
    limits.install()
    try:
        assert all(getattr(owner.__dict__[name], "__pipeops_limit__", False) for owner, name in patched)
        assert state_module.is_within_size_quota is limits.is_within_size_quota
    finally:
        limits.uninstall()
    assert limits.installed()  # installed twice: still on after one uninstall
    limits.uninstall()
    assert {(owner, name): owner.__dict__[name] for owner, name in patched} == originals
    assert state_module.is_within_size_quota is quota
    assert not limits.installed()
