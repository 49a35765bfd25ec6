"""sandbox.seams: moto made to behave as AWS where the sandbox relies on it."""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.responses import DynamoHandler

from sandbox import seams
from tests.conftest import create_pk_table

REGION = "us-east-1"
TABLE = "seams"
THREADS = 8
# With the interpreter switching threads every 10 µs (not 5 ms), 40 pairs a thread lose updates in
# every run without the seams (5 of 5 tried); 150 pairs at the default interval lost them in about
# half the runs only, in twice the time.
PAIRS = 40
SWITCH_INTERVAL = 1e-5
ROLE = "arn:aws:iam::123456789012:role/seams"


@pytest.fixture
def table(aws_env: None) -> Iterator[Any]:
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        create_pk_table(ddb, TABLE)
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
            failures.append(f"{holder}: {type(exc).__name__} {exc}")


def test_concurrent_conditional_writes_to_one_item_lose_nothing(table: Any) -> None:
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)  # interleave the threads' calls finely: a race shows at once
    seams.install()
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
        seams.uninstall()
        sys.setswitchinterval(switch_interval)
    item = table.get_item(TableName=TABLE, Key={"pk": {"S": "semaphore"}}, ConsistentRead=True)["Item"]
    assert failures == []
    assert item["active_count"] == {"N": "0"}
    assert [name for name in item if name.startswith("h#")] == []


def test_the_seams_wrap_what_moto_has_and_come_off_again() -> None:
    originals = {name: DynamoDBBackend.__dict__[name] for name in seams.dynamodb_atomic.DYNAMODB_ITEM_OPERATIONS}
    handlers = {name: DynamoHandler.__dict__[name] for name in seams.dynamodb_atomic.DYNAMODB_REQUEST_OPERATIONS}
    seams.install()
    seams.install()
    try:
        assert all(
            getattr(DynamoDBBackend.__dict__[name], "__pipeops_seam__", False)
            for name in seams.dynamodb_atomic.DYNAMODB_ITEM_OPERATIONS
        )
        # moto's request handler copies and serializes the item outside the backend: locked too
        assert all(
            getattr(DynamoHandler.__dict__[name], "__pipeops_seam__", False)
            for name in seams.dynamodb_atomic.DYNAMODB_REQUEST_OPERATIONS
        )
    finally:
        seams.uninstall()
    assert seams.installed()  # installed twice: still on after one uninstall
    seams.uninstall()
    assert {name: DynamoDBBackend.__dict__[name] for name in originals} == originals
    assert {name: DynamoHandler.__dict__[name] for name in handlers} == handlers
    assert not seams.installed()


def test_the_interpreter_and_cloudformation_seams_come_off_again() -> None:
    from moto.cloudformation.models import Stack
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

    before = (
        ExecutionWorker.__dict__["_get_evaluation_entrypoint"],
        Stack.__dict__["parse_template"],
    )
    seams.install()
    try:
        assert getattr(ExecutionWorker.__dict__["_get_evaluation_entrypoint"], "__pipeops_seam__", False)
        assert getattr(Stack.parse_template, "__pipeops_seam__", False)
    finally:
        seams.uninstall()
    after = (
        ExecutionWorker.__dict__["_get_evaluation_entrypoint"],
        Stack.__dict__["parse_template"],
    )
    assert after == before


def test_an_execution_listed_while_it_is_being_started_reads_as_running() -> None:
    """moto lists a new execution before `start()` sets its status (StartExecution racing a
    ListExecutions); AWS never shows an execution without one."""
    from moto.stepfunctions.parser.backend.execution import Execution

    starting = Execution.__new__(Execution)
    starting.exec_status = None
    with pytest.raises(AttributeError):
        _ = starting.status  # moto's own property, without the seam
    seams.install()
    try:
        assert starting.status == "RUNNING"
        from moto.stepfunctions.parser.api import ExecutionStatus

        starting.exec_status = ExecutionStatus.SUCCEEDED
        assert starting.status == "SUCCEEDED"
    finally:
        seams.uninstall()
    assert isinstance(Execution.__dict__["status"], property) and not getattr(
        Execution.__dict__["status"].fget, "__pipeops_seam__", False
    )


def test_the_interpreter_parses_each_json_path_once_and_reads_it_as_before() -> None:
    from moto.stepfunctions.parser.asl.component.common.path import result_path
    from moto.stepfunctions.parser.asl.utils import json_path

    before = (json_path.parse, result_path.parse)
    data = {"check": {"within_tolerance": True}, "files": ["a", "b"]}
    seams.install()
    try:
        assert json_path.parse("$.check") is json_path.parse("$.check")
        assert result_path.parse("$.mapping") is result_path.parse("$.mapping")
        assert json_path.extract_json("$.check.within_tolerance", data) is True
        assert json_path.extract_json("$.files[1]", data) == "b"
    finally:
        seams.uninstall()
    assert (json_path.parse, result_path.parse) == before
    assert json_path.parse("$.check") is not json_path.parse("$.check")


def test_a_json_template_body_is_read_as_json() -> None:
    from moto.cloudformation.models import Stack

    body = json.dumps({"Resources": {}, "Metadata": {"Big": 1e22, "Word": "yes"}})
    assert Stack.parse_template(body)["Metadata"]["Big"] == "1e+22"  # moto alone: YAML 1.1 reads a string
    seams.install()
    try:
        assert Stack.parse_template(body) == json.loads(body)  # as CloudFormation reads JSON
        assert Stack.parse_template("Resources: {}\nA: !Ref B\n")["A"] is not None  # YAML still moto's
    finally:
        seams.uninstall()


# --------------------------------------------------------------------------- the interpreter's costs

PUT_DEFINITION = {
    "StartAt": "Put",
    "States": {
        "Put": {
            "Type": "Task",
            "Resource": "arn:aws:states:::dynamodb:putItem",
            "Parameters": {"TableName": TABLE, "Item": {"pk": {"S.$": "$$.Execution.Name"}}},
            "ResultPath": None,
            "Next": "Say",
        },
        "Say": {"Type": "Pass", "Result": {"version": "first"}, "End": True},
    },
}


@pytest.fixture
def executing(aws_env: None) -> Iterator[Any]:
    """An executing Step Functions with the seams installed, and a table the tasks write to."""
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        boto3.client("dynamodb", region_name=REGION).create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        seams.install()
        try:
            yield boto3.client("stepfunctions", region_name=REGION)
        finally:
            seams.uninstall()


def run_to_end(sfn: Any, machine: str, name: str) -> dict[str, Any]:
    arn = sfn.start_execution(stateMachineArn=machine, name=name, input="{}")["executionArn"]
    deadline = time.monotonic() + 30
    while (desc := sfn.describe_execution(executionArn=arn))["status"] == "RUNNING":
        assert time.monotonic() < deadline, "the execution never ended"
        time.sleep(0.02)
    return desc


def test_a_definition_is_parsed_once_per_version(executing: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    parses: list[str] = []
    real_parse = AmazonStateLanguageParser.parse

    def counting_parse(definition: str) -> Any:
        parses.append(definition)
        return real_parse(definition)

    monkeypatch.setattr(AmazonStateLanguageParser, "parse", staticmethod(counting_parse))
    sfn = executing
    first = {**PUT_DEFINITION, "Comment": uuid.uuid4().hex}  # a definition no earlier test parsed
    machine = sfn.create_state_machine(
        name=f"seams-{uuid.uuid4().hex[:8]}", definition=json.dumps(first), roleArn=ROLE
    )["stateMachineArn"]
    outputs = [run_to_end(sfn, machine, f"run-{i}") for i in range(3)]
    assert [o["status"] for o in outputs] == ["SUCCEEDED"] * 3
    assert len(parses) == 1  # validated at create, and that parse ran all three executions

    second = json.loads(json.dumps(first))
    second["States"]["Say"]["Result"] = {"version": "second"}
    sfn.update_state_machine(stateMachineArn=machine, definition=json.dumps(second))
    outputs = [run_to_end(sfn, machine, f"again-{i}") for i in range(2)]
    assert [json.loads(o["output"])["version"] for o in outputs] == ["second"] * 2  # the new version ran
    assert len(parses) == 2
    items = boto3.client("dynamodb", region_name=REGION).scan(TableName=TABLE)["Items"]
    assert sorted(i["pk"]["S"] for i in items) == sorted([*(f"run-{i}" for i in range(3)), "again-0", "again-1"])

    with pytest.raises(ClientError, match="in definition"):  # an invalid one is still refused, as moto does
        sfn.create_state_machine(name="seams-bad", definition='{"StartAt": "Nowhere"}', roleArn=ROLE)
