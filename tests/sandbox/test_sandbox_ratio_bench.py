"""bench.sandbox_ratio's own parts: what it records from handlers, and that bare moto replays it."""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from typing import Any

import boto3
from botocore.exceptions import ClientError
from moto import mock_aws

from bench import sandbox_ratio
from sandbox.clients import sandbox_client
from sandbox.runtime import _RUNNING, RunningFunction

REGION = "us-east-1"
TABLE = "ratio"


def _table(ddb: Any) -> None:
    ddb.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


def _as_handler(work: Any) -> None:
    """Run `work` on a thread that looks like a handler's to the sandbox (as the runtime's do)."""

    def run() -> None:
        _RUNNING.set(RunningFunction("fn", "arn:aws:lambda:us-east-1:123456789012:function:fn", "role", "r1"))
        work()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()


def test_records_handler_calls_only_and_bare_moto_replays_them(aws_env: None) -> None:
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        _table(ddb)
        internal = sandbox_client("dynamodb", REGION, None)
        recorder = sandbox_ratio.CallRecorder().install()
        try:
            ddb.put_item(TableName=TABLE, Item={"pk": {"S": "not-a-handler"}})

            def handler_work() -> None:
                ddb.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "n": {"N": "0"}})
                ddb.update_item(
                    TableName=TABLE,
                    Key={"pk": {"S": "a"}},
                    UpdateExpression="ADD n :one",
                    ExpressionAttributeValues={":one": {"N": "1"}},
                )
                internal.describe_table(TableName=TABLE)  # the sandbox's own look-up (IAM facts)
                with contextlib.suppress(ClientError):
                    ddb.get_item(TableName="no-such-table", Key={"pk": {"S": "a"}})

            _as_handler(handler_work)
        finally:
            recorder.uninstall()
        snapshot = {"tables": [ddb.describe_table(TableName=TABLE)["Table"]], "queues": [], "buckets": [],
                    "machines": [], "parameters": []}
    assert [(c.operation, c.outcome, c.workflow) for c in recorder.calls] == [
        ("PutItem", "ok", False), ("UpdateItem", "ok", False), ("GetItem", "ResourceNotFoundException", False)
    ]

    with mock_aws():
        session = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name=REGION)
        sandbox_ratio._create_resources(session, REGION, snapshot)
        replay = sandbox_ratio._replay({}, session, recorder.calls)
        item = session.client("dynamodb").get_item(TableName=TABLE, Key={"pk": {"S": "a"}})["Item"]
    assert replay.errors == Counter({"dynamodb.GetItem: ResourceNotFoundException": 1})
    assert replay.mismatches == Counter()  # the failed read failed in the sandbox too
    assert item["n"] == {"N": "1"}


def _call(operation: str, params: dict[str, Any], *, workflow: bool = False) -> sandbox_ratio.RecordedCall:
    return sandbox_ratio.RecordedCall("dynamodb", REGION, operation, params, workflow=workflow, outcome="ok")


def test_the_workflows_own_writes_are_replayed_untimed_so_handler_calls_meet_the_sandboxs_state(
    aws_env: None,
) -> None:
    marked = _call("PutItem", {"TableName": TABLE, "Item": {"pk": {"S": "run"}, "status": {"S": "DETECTING"}}},
                   workflow=True)  # the state machine's MarkDetecting
    verdict = _call("UpdateItem", {
        "TableName": TABLE, "Key": {"pk": {"S": "run"}}, "UpdateExpression": "SET #s = :done",
        "ConditionExpression": "#s = :detecting", "ExpressionAttributeNames": {"#s": "status"},
        "ExpressionAttributeValues": {":done": {"S": "COMPLETE"}, ":detecting": {"S": "DETECTING"}},
    })

    def replayed(calls: list[sandbox_ratio.RecordedCall]) -> sandbox_ratio.Replay:
        with mock_aws():
            session = boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name=REGION)
            _table(session.client("dynamodb"))
            return sandbox_ratio._replay({}, session, calls)

    with_workflow, without = replayed([marked, verdict]), replayed([verdict])

    assert with_workflow.mismatches == Counter() and with_workflow.untimed_s > 0
    assert without.mismatches == Counter(
        {"dynamodb.UpdateItem: sandbox ok, bare ConditionalCheckFailedException": 1}
    )
    assert without.untimed_s == 0


def test_thread_kinds_and_the_profile_summary() -> None:
    assert sandbox_ratio.thread_kind("lambda:pipeops-Ingest:1a2b3c4d").startswith("handlers")
    assert sandbox_ratio.thread_kind("Thread-7 (_execution_logic)") == "ASL interpreter: executions"
    assert sandbox_ratio.thread_kind("sandbox-sfn-status") == "the execution status watcher"
    before = {"handlers": {("a.py", 1, "f"): (1, 1.0, 1.0)}}
    after = {
        "handlers": {("a.py", 1, "f"): (3, 3.0, 3.0)},
        "ASL interpreter: executions": {("x/asl/parse/asl_parser.py", 52, "parse"): (2, 0.5, 2.0)},
    }
    delta = sandbox_ratio.stats_delta(before, after)
    assert delta["handlers"][("a.py", 1, "f")] == (2, 2.0, 2.0)
    summary = sandbox_ratio.where_time_goes(delta)
    assert "CPU 2.5 s" in summary and "By thread: handlers 80%, ASL interpreter: executions 20%" in summary
    assert "moto parsing state machine definitions 80%" in summary  # cumulative 2.0 of 2.5


def test_goal_layouts_run_the_designed_waits_at_the_template_minimum_and_one_row_keeps_the_defaults():
    from stack.template import load_template

    declared = load_template()["Parameters"]
    for layout in ("single", "folders"):
        parameters = sandbox_ratio.layout_parameters(layout)
        for name in ("FolderSettleSeconds", "CapacityRetrySeconds"):
            assert parameters[name] == str(declared[name]["MinValue"])
    with_waits = sandbox_ratio.layout_parameters("folders-waits")
    assert with_waits["JobFolderDepth"] == "1"
    assert "FolderSettleSeconds" not in with_waits and "CapacityRetrySeconds" not in with_waits
