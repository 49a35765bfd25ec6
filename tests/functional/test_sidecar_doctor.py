"""`pipeops sidecar doctor` on moto: every resource the description names, looked up read only; a
wrong name, key or timeout is one line naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from pipeops.cli import app
from tests.conftest import REGION, toy_function

TOML_LINES = """
[pipeline]
name = "documents"
[queue]
main = "doc-queue"
dead_letter = ["doc-dlq"]
[counter]
table = "concurrency"
key_name = "counter_id"
key_value = "workflow_counter"
max = {{ function = "processor", variable = "MAX_CONCURRENT" }}
[workflow]
state_machines = ["{machine}"]
[alarms]
functions = [{{ name = "processor", timeout = {timeout} }}]
[tracking]
table = "{tracking}"
status_attribute = "status"
"""


def client(service: str) -> Any:
    return boto3.client(service, region_name=REGION)


@pytest.fixture
def described(aws: None) -> None:
    """The resources TOML_LINES names."""
    for queue in ("doc-queue", "doc-dlq"):
        client("sqs").create_queue(QueueName=queue)
    for table, key in (("concurrency", "counter_id"), ("tracking", "job_id")):
        client("dynamodb").create_table(
            TableName=table, KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST",
        )  # fmt: skip
    client("dynamodb").put_item(TableName="concurrency", Item={"counter_id": {"S": "workflow_counter"}, "active_count": {"N": "0"}})
    role = client("iam").create_role(RoleName="sfn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    definition = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}})
    client("stepfunctions").create_state_machine(name="doc-workflow", definition=definition, roleArn=role)
    toy_function("processor", "x.handler", timeout=60, Environment={"Variables": {"MAX_CONCURRENT": "3"}})


def doctor(tmp_path: Path, *, machine: str = "doc-workflow", timeout: int = 60, tracking: str = "tracking") -> tuple[int, dict[str, Any]]:
    config = tmp_path / "pipeops.toml"
    config.write_text(TOML_LINES.format(machine=machine, timeout=timeout, tracking=tracking), encoding="utf-8")
    result = CliRunner().invoke(app, ["sidecar", "doctor", "--config", str(config), "--json"])
    return result.exit_code, json.loads(result.stdout)["data"]


def failed(data: dict[str, Any]) -> dict[str, str]:
    return {check["field"]: check["detail"] for check in data["checks"] if not check["ok"]}


def test_every_named_resource_found_exits_0(described: None, tmp_path: Path) -> None:
    code, data = doctor(tmp_path)
    assert (code, failed(data)) == (0, {})
    fields = [check["field"] for check in data["checks"]]
    assert fields == ["queue.main", "queue.dead_letter[0]", "counter.table", "counter.key_value",
                      "workflow.state_machines[0]", "counter.max", "alarms.functions[0]", "tracking.table"]


def test_a_wrong_state_machine_table_or_timeout_is_named(described: None, tmp_path: Path) -> None:
    code, data = doctor(tmp_path, machine="doc-workflw", timeout=30, tracking="trackng")
    assert code == 1
    problems = failed(data)
    assert set(problems) == {"workflow.state_machines[0]", "alarms.functions[0]", "tracking.table"}
    assert "StateMachineDoesNotExist" in problems["workflow.state_machines[0]"]
    assert "its timeout is 60 s, not 30" in problems["alarms.functions[0]"]
    assert "ResourceNotFoundException" in problems["tracking.table"]


def test_a_wrong_key_is_named(described: None, tmp_path: Path) -> None:
    client("dynamodb").delete_item(TableName="concurrency", Key={"counter_id": {"S": "workflow_counter"}})
    code, data = doctor(tmp_path)
    assert code == 1 and failed(data) == {"counter.key_value": "no item counter_id = workflow_counter in concurrency (a wrong key?)"}


def test_a_wrong_description_exits_2(aws: None, tmp_path: Path) -> None:
    config = tmp_path / "pipeops.toml"
    config.write_text("[counter]\ntable = 1\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["sidecar", "doctor", "--config", str(config)])
    assert result.exit_code == 2 and "counter.table: found 1 (an integer)" in result.stderr
