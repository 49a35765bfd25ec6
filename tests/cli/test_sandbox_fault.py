"""`pipeops sandbox fault` against a sandbox served by `pipeops sandbox up` in its own process: a
person rehearsing an incident by hand lists the faults, injects one (a sandbox fault over the
served control, a data fault written with boto3), sees it in force, clears it; and every mistake
says what to do."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from pipeline.config import SEMAPHORE_KEY
from pipeops.cli import app
from pipeops.faults import FAULTS, GHOST_HOLDER
from tests.conftest import envelope, eventually, sandbox_up_process

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served_endpoint() -> Iterator[str]:
    with sandbox_up_process("--port", "0") as server:
        line = server.stdout.readline()  # type: ignore[union-attr]
        assert line, server.stderr.read()  # type: ignore[union-attr]
        yield json.loads(line)["endpoint_url"]


@pytest.fixture
def cli(served_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")

    def run(*arguments: str) -> Any:
        return CliRunner().invoke(app, ["sandbox", "fault", *arguments, "--endpoint-url", served_endpoint])

    return run


def test_list_names_every_fault_with_its_alarm_and_what_is_in_force(cli: Any) -> None:
    result = cli("list", "--json")
    assert result.exit_code == 0, result.stderr
    data = envelope(result.stdout, "sandbox-fault-list")
    assert [row["name"] for row in data["faults"]] == list(FAULTS)
    assert data["active"] == []
    row = next(r for r in data["faults"] if r["name"] == "poison-messages")
    assert row["expected_alarms"] == ["DlqNotEmpty", "RouterFailures"] and row["remedy"] == "dlq-messages"


def test_a_sandbox_fault_is_in_force_until_cleared(cli: Any) -> None:
    injected = cli("inject", "router-crash-before-start", "--for", "10m", "--share", "0.5", "--json")
    assert injected.exit_code == 0, injected.stderr
    [spec] = envelope(injected.stdout, "sandbox-fault-inject")["injected"]
    assert spec["kind"] == "crash" and spec["share"] == 0.5 and spec["for_seconds"] == 600.0
    assert spec["function"].startswith("pipeops-RouterFunction-"), "the logical id is resolved by the sandbox"
    active = envelope(cli("list", "--json").stdout, "sandbox-fault-list")["active"]
    assert [a["name"] for a in active] == ["router-crash-before-start"]
    assert 0 < active[0]["seconds_left"] <= 600
    assert "yes:" in cli("list").stdout
    cleared = cli("clear", "--json")
    assert envelope(cleared.stdout, "sandbox-fault-clear")["cleared"] == ["router-crash-before-start"]
    assert envelope(cli("list", "--json").stdout, "sandbox-fault-list")["active"] == []


def test_a_data_fault_is_written_with_boto3_and_stays_after_clear(cli: Any, served_endpoint: str) -> None:
    result = cli("inject", "ghost-holder")
    assert result.exit_code == 0, result.stderr
    assert f"holder {GHOST_HOLDER}" in result.stdout and "the scheduled reconciler" in result.stdout
    cleared = cli("clear", "ghost-holder")
    assert cleared.exit_code == 0 and "stays until repaired" in cleared.stdout
    ddb = boto3.client("dynamodb", endpoint_url=served_endpoint, region_name="us-east-1")
    table = boto3.client("cloudformation", endpoint_url=served_endpoint, region_name="us-east-1").describe_stacks(
        StackName="pipeops"
    )["Stacks"][0]["Outputs"]
    name = next(o["OutputValue"] for o in table if o["OutputKey"] == "CoordinationTableName")
    item = ddb.get_item(TableName=name, Key={"doc_key": {"S": SEMAPHORE_KEY}}, ConsistentRead=True)["Item"]
    assert GHOST_HOLDER in item["holders"]["M"]


def test_mistakes_say_what_to_do(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    unknown = cli("inject", "router-crash", "--json")
    assert unknown.exit_code == 2
    assert "no fault 'router-crash'" in unknown.stderr and "router-crash-before-start" in unknown.stderr
    assert envelope(unknown.stdout, "error")["code"] == "bad_input"
    bad_share = cli("inject", "sfn-throttled", "--share", "1.5")
    assert bad_share.exit_code == 2 and "--share 1.5 is not in (0, 1]" in bad_share.stderr
    bad_duration = cli("inject", "sfn-throttled", "--for", "soon")
    assert bad_duration.exit_code == 2 and "--for 'soon' is not a duration" in bad_duration.stderr
    data_for = cli("inject", "ghost-holder", "--for", "5m")
    assert data_for.exit_code == 2 and "has no duration" in data_for.stderr
    nobody = CliRunner().invoke(app, ["sandbox", "fault", "inject", "sfn-throttled", "--endpoint-url", "http://127.0.0.1:9"])
    assert nobody.exit_code == 2 and "pipeops sandbox up" in nobody.stderr
    no_endpoint = CliRunner().invoke(app, ["sandbox", "fault", "clear"])
    assert no_endpoint.exit_code == 2 and "pipeops sandbox up" in no_endpoint.stderr


def test_a_fault_injected_from_the_cli_acts_on_the_served_pipeline(cli: Any, served_endpoint: str) -> None:
    """The handlers run in the server's process and call it over HTTP: their StartExecution is
    throttled there, counted where the ExecutionsThrottled alarm reads, and once cleared the
    redelivered message completes its run."""

    def aws(service: str) -> Any:
        return boto3.client(service, endpoint_url=served_endpoint, region_name="us-east-1")

    outputs = {o["OutputKey"]: o["OutputValue"] for o in aws("cloudformation").describe_stacks(StackName="pipeops")["Stacks"][0]["Outputs"]}
    assert cli("clear").exit_code == 0  # whatever an earlier test left in force
    assert cli("inject", "sfn-throttled").exit_code == 0
    aws("s3").put_object(Bucket=outputs["InputBucketName"], Key="throttled.txt", Body=b"mail ann@corp.example\n")

    def throttled() -> float:
        points = aws("cloudwatch").get_metric_statistics(
            Namespace="AWS/States", MetricName="ExecutionThrottled",
            Dimensions=[{"Name": "StateMachineArn", "Value": outputs["StateMachineArn"]}],
            StartTime="2000-01-01T00:00:00Z", EndTime="2100-01-01T00:00:00Z", Period=86400, Statistics=["Sum"],
        )["Datapoints"]
        return sum(point["Sum"] for point in points)

    eventually(throttled, "the router's StartExecution was throttled and counted")
    assert cli("clear", "sfn-throttled").exit_code == 0

    def completed() -> bool:
        items = aws("dynamodb").scan(TableName=outputs["TrackingTableName"], ConsistentRead=True)["Items"]
        return any(
            item.get("status", {}).get("S") == "COMPLETE" and "throttled.txt" in item.get("files", {}).get("SS", [])
            for item in items
        )

    eventually(completed, "the redelivered message completed its run", timeout=240)
