"""The sidecar's reconciler (monitors.reconcile.sidecar) on moto: a plain counter of a pipeline we did
not build, repaired only when two observations a grace window apart agree, each repair conditional and
audited; a blind observer (a wrong key, a wrong state machine) reported, never "healthy"."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from monitors.reconcile import sidecar
from pipeline.stores.audit import AuditStore
from tests.conftest import REGION, FakeLambdaContext, emf_totals, toy_function

COUNTER_TABLE = "their-concurrency"
SIDECAR_TABLE = "sidecar-state"
QUEUE = "their-documents"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
GRACE = 300


def client(service: str) -> Any:
    return boto3.client(service, region_name=REGION)


@pytest.fixture
def their_pipeline(aws: None, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Their counter table, state machine and queue; the sidecar's table; the sidecar's environment."""
    ddb = client("dynamodb")
    ddb.create_table(
        TableName=COUNTER_TABLE, KeySchema=[{"AttributeName": "counter_id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "counter_id", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST",
    )  # fmt: skip
    ddb.create_table(
        TableName=SIDECAR_TABLE,
        KeySchema=[{"AttributeName": "doc_key", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": name, "AttributeType": "S"} for name in ("doc_key", "audit_stream", "at")],
        GlobalSecondaryIndexes=[{
            "IndexName": "audit-by-time", "Projection": {"ProjectionType": "ALL"},
            "KeySchema": [{"AttributeName": "audit_stream", "KeyType": "HASH"}, {"AttributeName": "at", "KeyType": "RANGE"}],
        }],
        BillingMode="PAY_PER_REQUEST",
    )  # fmt: skip
    role = client("iam").create_role(RoleName="sfn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    definition = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}})
    arn = client("stepfunctions").create_state_machine(name="their-workflow", definition=definition, roleArn=role)["stateMachineArn"]
    client("sqs").create_queue(QueueName=QUEUE)
    env = {
        "SIDECAR_TABLE": SIDECAR_TABLE, "COUNTER_TABLE": COUNTER_TABLE, "COUNTER_KEY_NAME": "counter_id",
        "COUNTER_KEY_VALUE": "workflow_counter", "COUNTER_ATTRIBUTE": "active_count", "STATE_MACHINE_ARNS": arn,
        "MAIN_QUEUE_NAME": QUEUE, "MAX_CONCURRENT": "3", "RECONCILE_GRACE_SECONDS": str(GRACE), "RECONCILE_APPLY": "true",
    }  # fmt: skip
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def set_count(count: int) -> None:
    client("dynamodb").put_item(TableName=COUNTER_TABLE, Item={"counter_id": {"S": "workflow_counter"}, "active_count": {"N": str(count)}})


def count() -> int:
    item = client("dynamodb").get_item(TableName=COUNTER_TABLE, Key={"counter_id": {"S": "workflow_counter"}})["Item"]
    return int(item["active_count"]["N"])


def run(env: dict[str, str], at: datetime, *, apply: bool = True) -> dict[str, Any]:
    return sidecar.run(sidecar.SidecarTarget.from_env(env), apply=apply, actor="tester", now=at)


def test_a_stalled_counter_is_remembered_then_repaired_conditionally_and_audited(their_pipeline: dict[str, str]) -> None:
    set_count(3)  # at the max, nothing running: the processor died after its increments
    first = run(their_pipeline, T0)
    assert (first["verdict"], first["slots_full_idle"], count()) == ("remember", True, 3)
    early = run(their_pipeline, T0 + timedelta(seconds=GRACE - 1))
    assert early["verdict"] == "remember" and count() == 3
    repaired = run(their_pipeline, T0 + timedelta(seconds=GRACE + 1))
    assert (repaired["verdict"], repaired["applied"], count()) == ("repair", True, 0)
    [record] = AuditStore(SIDECAR_TABLE, client("dynamodb")).history(T0 - timedelta(days=1)).records
    assert (record.action, record.target, record.by) == ("set_count", f"{COUNTER_TABLE}/workflow_counter", "tester")
    after = run(their_pipeline, T0 + timedelta(seconds=2 * GRACE))
    assert after["verdict"] == "in_sync" and not after["slots_full_idle"]


def test_running_executions_are_counted_and_a_moving_counter_is_left_alone(their_pipeline: dict[str, str]) -> None:
    for name in ("a", "b"):
        client("stepfunctions").start_execution(stateMachineArn=their_pipeline["STATE_MACHINE_ARNS"], name=name)
    set_count(2)
    assert run(their_pipeline, T0)["verdict"] == "in_sync"
    set_count(3)
    assert run(their_pipeline, T0 + timedelta(seconds=1))["verdict"] == "remember"
    set_count(2)  # a processor released: the two observations disagree
    set_count(3)
    client("dynamodb").update_item(
        TableName=COUNTER_TABLE, Key={"counter_id": {"S": "workflow_counter"}}, UpdateExpression="SET touched = :t",
        ExpressionAttributeValues={":t": {"N": "1"}},
    )  # fmt: skip
    moved = run(their_pipeline, T0 + timedelta(seconds=GRACE + 2))
    assert moved["verdict"] == "changing" and count() == 3


def test_report_only_decides_the_repair_and_writes_nothing(their_pipeline: dict[str, str]) -> None:
    set_count(2)
    run(their_pipeline, T0, apply=False)
    dry = run(their_pipeline, T0 + timedelta(seconds=GRACE), apply=False)
    assert (dry["verdict"], dry["applied"], dry["dry_run"], count()) == ("repair", None, True, 2)


def test_a_wrong_key_is_implausible_and_nothing_is_written(their_pipeline: dict[str, str]) -> None:
    set_count(3)
    wrong = their_pipeline | {"COUNTER_KEY_VALUE": "workflow-counter"}
    run(wrong, T0)
    held = run(wrong, T0 + timedelta(seconds=GRACE))
    assert held["verdict"] == "in_sync" and "no counter item under its key" in held["implausible"]
    assert count() == 3


def test_a_wrong_state_machine_is_reported_blind_with_one_line_naming_it(
    their_pipeline: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    set_count(3)
    missing = their_pipeline["STATE_MACHINE_ARNS"].replace("their-workflow", "their-workfolw")
    monkeypatch.setenv("STATE_MACHINE_ARNS", missing)
    result = sidecar.handler({}, FakeLambdaContext())
    assert result["verdict"] == "blind" and "their-workfolw" in result["implausible"]
    assert count() == 3
    totals = emf_totals(capsys.readouterr().out)
    assert totals["ImplausibleDrift"] == 1 and totals["ReconcileRuns"] == 1


def test_the_handler_emits_the_stall_signals_the_alarms_watch(
    their_pipeline: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    set_count(3)
    url = client("sqs").get_queue_url(QueueName=QUEUE)["QueueUrl"]
    client("sqs").send_message(QueueUrl=url, MessageBody="{}")
    sidecar.handler({}, FakeLambdaContext())
    totals = emf_totals(capsys.readouterr().out)
    assert set(totals) == {metric.value for metric in sidecar.EMITTED}
    assert (totals["SlotsFullIdle"], totals["CounterDrift"], totals["ImplausibleDrift"], totals["BacklogStalled"]) == (1, 3, 0, 0)
    sidecar.handler({"dry_run": True}, FakeLambdaContext())  # a second look: the backlog still waits, nothing runs
    assert emf_totals(capsys.readouterr().out)["BacklogStalled"] == 1


def test_the_max_is_read_from_the_pipelines_own_function(their_pipeline: dict[str, str]) -> None:
    toy_function("their-processor", "x.handler", Environment={"Variables": {"MAX_CONCURRENT": "2"}})
    env = {k: v for k, v in their_pipeline.items() if k != "MAX_CONCURRENT"} | {"MAX_FUNCTION": "their-processor", "MAX_VARIABLE": "MAX_CONCURRENT"}
    set_count(2)
    assert run(env, T0)["max"] == 2 and run(env, T0)["slots_full_idle"]
    unreadable = env | {"MAX_VARIABLE": "NOT_THERE"}
    with pytest.raises(sidecar.MaxUnreadable, match="their-processor has no whole-number environment variable NOT_THERE"):
        run(unreadable, T0)


@pytest.mark.parametrize(
    ("variable", "wrong", "named"),
    [("COUNTER_TABLE", "their-concurency", "their-concurency"), ("MAIN_QUEUE_NAME", "their-docs", "their-docs")],
)
def test_a_wrong_table_or_queue_name_is_one_line_naming_it_never_healthy(
    their_pipeline: dict[str, str], monkeypatch: pytest.MonkeyPatch, variable: str, wrong: str, named: str
) -> None:
    set_count(3)
    monkeypatch.setenv(variable, wrong)
    result = sidecar.handler({}, FakeLambdaContext())
    assert result["verdict"] == "blind" and named in result["implausible"] and "\n" not in result["implausible"]
    assert count() == 3


def test_a_runbook_documents_steps_get_the_runbook_lambdas_answer(their_pipeline: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """The Automation documents of the reconciler runbooks invoke the sidecar's reconciler:
    diagnose (DryRun true) changes nothing; the verdicts and exit codes are the runbook Lambda's."""
    set_count(0)
    absent = sidecar.handler({"RunbookId": "slots-full-idle", "DryRun": True}, FakeLambdaContext())
    assert (absent["id"], absent["verdict"], absent["exit_code"], absent["error"]) == ("slots-full-idle", "absent", 0, "")
    set_count(3)
    remains = sidecar.handler({"RunbookId": "slots-full-idle", "DryRun": False, "GraceSeconds": ""}, FakeLambdaContext())
    assert (remains["verdict"], remains["exit_code"], count()) == ("remains", 1, 3)  # one observation: remembered
    assert all(isinstance(value, str) for value in remains["evidence"].values())
    assert remains["evidence"]["active_count"] == "3" and remains["evidence"]["decision"] == "remember"
