"""The alarms as deployed, moved by the sandbox's alarm engine as CloudWatch would move them.

A poison message pages through the DLQ alarm and its SNS topic. A lost status event pages through
the drift, stall signature and backlog alarms, and `pipeops reconcile --apply` clears them. The
engine evaluates in virtual time (one virtual minute is a few real seconds), so these tests wait
on alarm states, never on a fixed sleep.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from typer.testing import CliRunner

from pipeline.status import JobStatus
from pipeline.stores.semaphore import Semaphore
from pipeline.stores.tracking import HEAD_SORT_KEY, RunRecord
from pipeops.cli import app
from sandbox.clock import TimeScale
from tests.conftest import envelope

pytestmark = pytest.mark.slow


def states(sandbox: Any) -> dict[str, str]:
    pages = sandbox.client("cloudwatch").get_paginator("describe_alarms").paginate(
        AlarmNamePrefix="pipeops-", AlarmTypes=["MetricAlarm", "CompositeAlarm"]
    )
    return {
        alarm["AlarmName"].removeprefix("pipeops-"): alarm["StateValue"]
        for page in pages
        for alarm in page.get("MetricAlarms", []) + page.get("CompositeAlarms", [])
    }


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def subscribe_a_queue(sandbox: Any) -> str:
    """An SQS queue subscribed to the alarm topic, as a pager would be."""
    sqs, sns = sandbox.client("sqs"), sandbox.client("sns")
    url = sqs.create_queue(QueueName="pager")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    [topic] = [t["TopicArn"] for t in sns.list_topics()["Topics"] if "AlarmTopic" in t["TopicArn"]]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "false"})
    return url


def notifications(sandbox: Any, url: str) -> list[dict[str, Any]]:
    sqs = sandbox.client("sqs")
    found = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        for message in batch:
            found.append(json.loads(json.loads(message["Body"])["Message"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return found


def test_a_poison_message_pages_through_the_dlq_alarm_and_its_topic(sandbox: Any) -> None:
    pager = subscribe_a_queue(sandbox)
    sqs = sandbox.client("sqs")
    main = sandbox.outputs["MainQueueUrl"]
    sqs.set_queue_attributes(QueueUrl=main, Attributes={"VisibilityTimeout": "20"})  # 1 s at the time scale
    sqs.send_message(QueueUrl=main, MessageBody='{"v": 1, "job_id": 42')
    wait_until(lambda: states(sandbox).get("DlqNotEmpty") == "ALARM", 300, "the DLQ alarm")
    received: list[dict[str, Any]] = []
    wait_until(
        lambda: bool(received.extend(notifications(sandbox, pager)) or any(
            n["AlarmName"] == "pipeops-DlqNotEmpty" and n["NewStateValue"] == "ALARM" for n in received
        )),
        60,
        "the ALARM notification",
    )
    [page] = [n for n in received if n["AlarmName"] == "pipeops-DlqNotEmpty" and n["NewStateValue"] == "ALARM"]
    assert "Runbook: dlq-messages." in page["AlarmDescription"]
    assert page["Trigger"]["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert states(sandbox)["PipelineUnhealthy"] == "ALARM"  # the composite pages once for all
    listed = CliRunner().invoke(app, ["alarms", "list", "--json"])
    assert listed.exit_code == 1
    rows = envelope(listed.output, "alarms")
    [dlq] = [row for row in rows if row["name"] == "pipeops-DlqNotEmpty"]
    assert dlq["state"] == "ALARM" and dlq["runbook"] == "dlq-messages" and dlq["reason"]
    assert rows[0]["state"] == "ALARM"  # ALARM first


def runs(sandbox: Any) -> list[RunRecord]:
    items = sandbox.client("dynamodb").scan(TableName=sandbox.outputs["TrackingTableName"], ConsistentRead=True)["Items"]
    return [RunRecord.from_item(i) for i in items if i["started_at"]["S"] != HEAD_SORT_KEY]


STALL_ALARMS = ("CounterDrift", "SlotsFullIdle", "BacklogStalled")


def test_a_lost_status_event_pages_drift_and_stall_and_reconcile_clears_them(make_sandbox: Any) -> None:
    # The scheduled reconciler reports without repairing, so the drift stays until someone acts.
    # CounterDrift needs three 5-minute periods: one virtual minute is 1.2 s here, not the default 3 s.
    sandbox = make_sandbox(
        MaxConcurrentWorkflows="1",
        ReconcileApply="false",
        BacklogStallSeconds="10",
        time_scale=TimeScale(0.02),
    )
    rule = sandbox.deployment.resources["WorkflowTrackerFunctionExecutionStatusChange"]
    sandbox.bus.pause_rule(rule)  # the tracker never hears the first execution end: its slot leaks
    put = sandbox.client("s3").put_object
    bucket = sandbox.outputs["InputBucketName"]
    put(Bucket=bucket, Key="first.txt", Body=b"mail ann@corp.example\n")
    wait_until(lambda: [r.status for r in runs(sandbox)] == [JobStatus.COMPLETE], 300, "the first run")
    put(Bucket=bucket, Key="second.txt", Body=b"mail bob@corp.example\n")  # waits for a slot forever

    wait_until(lambda: all(states(sandbox).get(a) == "ALARM" for a in STALL_ALARMS), 600, "the stall alarms")
    seen = states(sandbox)
    assert seen["PipelineUnhealthy"] == "ALARM"
    status = CliRunner().invoke(app, ["status", "--json"])
    firing = {a["name"] for a in envelope(status.output, "status")["alarms_in_alarm"]}
    assert {f"pipeops-{a}" for a in STALL_ALARMS} <= firing

    repaired = CliRunner().invoke(app, ["reconcile", "--apply", "--grace-seconds", "0", "--json"])
    assert [a["kind"] for a in envelope(repaired.output, "reconcile")["actions"]] == ["release_holder"]
    sandbox.bus.resume_rule(rule)  # the held event is delivered late: the tracker finds no holder
    wait_until(lambda: all(r.status is JobStatus.COMPLETE for r in runs(sandbox)) and len(runs(sandbox)) == 2, 300, "the second run")
    wait_until(lambda: all(states(sandbox).get(a) == "OK" for a in STALL_ALARMS), 600, "the alarms to clear")
    state = Semaphore(sandbox.outputs["CoordinationTableName"], sandbox.client("dynamodb")).read()
    assert state.active_count == 0 and state.holders == {}
