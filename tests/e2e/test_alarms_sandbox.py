"""The alarms as deployed, moved by the sandbox's alarm engine as CloudWatch would move them.

A poison message pages once, through the composite and the page topic; a new stack pages nobody; a
DynamoDB throttle episode alarms and returns to OK. A lost status event pages through
the drift, stall signature and backlog alarms, and `pipeops reconcile --apply` clears them. The
engine evaluates in virtual time (one virtual minute is a few real seconds), so these tests wait
on alarm states, never on a fixed sleep.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from typer.testing import CliRunner

from alarms.catalog import DEFAULT_RUNBOOK_BASE_URL
from pipeline.status import JobStatus
from pipeline.stores.semaphore import Semaphore
from pipeops.cli import app
from sandbox.clock import TimeScale
from tests.conftest import alarm_states, envelope, runs, subscribe_a_queue, wait_for

pytestmark = pytest.mark.slow


def notifications(sandbox: Any, url: str) -> list[dict[str, Any]]:
    sqs = sandbox.client("sqs")
    found = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        for message in batch:
            found.append(json.loads(json.loads(message["Body"])["Message"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return found


def wait_virtual(sandbox: Any, minutes: float) -> None:
    """Until the alarm engine's clock has moved `minutes` virtual minutes, then one more pass."""
    target = sandbox.alarms.virtual_now() + timedelta(minutes=minutes)
    wait_for(lambda: sandbox.alarms.virtual_now() >= target, 600, f"{minutes} virtual minutes", every=0.5)
    sandbox.alarms.evaluate_now()


def test_one_incident_pages_once_through_the_composite(sandbox: Any) -> None:
    """A poison message: the router fails it 5 times, the DLQ receives it. DlqNotEmpty and
    RouterFailures are the composite's children: the page topic hears the composite, once."""
    pager, states_topic = subscribe_a_queue(sandbox), subscribe_a_queue(sandbox, "AlarmStateTopic")
    sqs = sandbox.client("sqs")
    main = sandbox.outputs["MainQueueUrl"]
    sqs.set_queue_attributes(QueueUrl=main, Attributes={"VisibilityTimeout": "20"})  # 1 s at the time scale
    sqs.send_message(QueueUrl=main, MessageBody='{"v": 1, "job_id": 42')
    wait_for(lambda: alarm_states(sandbox).get("DlqNotEmpty") == "ALARM", 300, "the DLQ alarm", every=0.5)
    wait_for(lambda: alarm_states(sandbox).get("PipelineUnhealthy") == "ALARM", 60, "the composite", every=0.5)
    wait_virtual(sandbox, 10)  # everything the incident fires has fired

    pages = notifications(sandbox, pager)
    assert [(n["AlarmName"], n["NewStateValue"]) for n in pages] == [("pipeops-PipelineUnhealthy", "ALARM")]
    [page] = pages
    assert page["AlarmDescription"].endswith(f"Runbooks: {DEFAULT_RUNBOOK_BASE_URL}/README.md")  # Fn::Sub resolved
    children = {child["Arn"].rsplit(":", 1)[1] for child in page["TriggeringChildren"]}
    assert children and children <= {"pipeops-DlqNotEmpty", "pipeops-RouterFailures"}  # whichever fired first
    context = {(n["AlarmName"], n["NewStateValue"]) for n in notifications(sandbox, states_topic)}
    assert ("pipeops-DlqNotEmpty", "ALARM") in context  # each child that fired: on the state topic
    listed = CliRunner().invoke(app, ["alarms", "list", "--json"])
    assert listed.exit_code == 1
    rows = envelope(listed.output, "alarms")
    [dlq] = [row for row in rows if row["name"] == "pipeops-DlqNotEmpty"]
    assert dlq["state"] == "ALARM" and dlq["runbook"] == "dlq-messages" and dlq["reason"]
    assert rows[0]["state"] == "ALARM"  # ALARM first


def test_a_new_stack_sends_no_page_in_its_first_15_virtual_minutes(make_sandbox: Any) -> None:
    """The reconciler first reports one ReconcileSchedule after creation: its heartbeat alarm waits
    for that first datapoint, and every alarm's first OK goes to the state topic, not the page."""
    sandbox = make_sandbox(time_scale=TimeScale(0.02))  # a virtual minute is 1.2 s
    page = sandbox.deployment.resources["AlarmTopic"]
    wait_virtual(sandbox, 15)
    assert [(t.alarm_name, t.new_state.value) for t in sandbox.alarms.transitions if page in t.notified] == []
    assert not any(t.new_state.value == "ALARM" for t in sandbox.alarms.transitions)
    seen = alarm_states(sandbox)
    assert seen["ReconcilerSilent"] == "OK"  # its first heartbeats have come
    assert "ALARM" not in seen.values()


def test_a_dynamodb_throttle_episode_alarms_and_then_returns_to_ok(make_sandbox: Any) -> None:
    """The sandbox does not throttle DynamoDB: the test publishes WriteThrottleEvents for the
    coordination table as DynamoDB does during an episode (only while there are throttles)."""
    sandbox = make_sandbox(time_scale=TimeScale(0.02))
    table = sandbox.outputs["CoordinationTableName"]
    cloudwatch = sandbox.client("cloudwatch")
    throttles = {"MetricName": "WriteThrottleEvents", "Dimensions": [{"Name": "TableName", "Value": table}], "Value": 4}

    def throttled() -> bool:
        cloudwatch.put_metric_data(Namespace="AWS/DynamoDB", MetricData=[throttles])
        return alarm_states(sandbox).get("CoordinationWriteThrottles") == "ALARM"

    wait_for(throttled, 300, "the throttle alarm", every=0.5)  # 5 virtual minutes of throttles
    wait_for(lambda: alarm_states(sandbox).get("CoordinationWriteThrottles") == "OK", 300, "the alarm back to OK", every=0.5)
    wait_virtual(sandbox, 10)  # and it stays there once the episode has left the range
    assert alarm_states(sandbox)["CoordinationWriteThrottles"] == "OK"


def test_alarms_check_against_a_served_sandbox_agrees_with_its_engine(aws_env: None) -> None:
    """`pipeops alarms check --endpoint-url` asks the served sandbox for its clock (/_sandbox/clock):
    on a healthy sandbox every verdict is the state the engine gave, and exit 0."""
    from sandbox.sandbox import Sandbox

    with Sandbox(serve=True, time_scale=TimeScale(0.02)) as served:
        wait_virtual(served, 12)  # a few reconciler runs
        result = CliRunner().invoke(app, ["alarms", "check", "--json", "--endpoint-url", served.endpoint_url])
        listed = {row["name"]: row["state"] for row in envelope(CliRunner().invoke(app, ["alarms", "list", "--json"]).output, "alarms")}
    rows = envelope(result.output, "alarm_checks")
    assert result.exit_code == 0, result.output
    assert {row["name"]: row["verdict"] for row in rows} == {name: listed[name] for name in (row["name"] for row in rows)}
    assert len(rows) >= 40 and all(row["verdict"] == "OK" for row in rows)
    [silent] = [row for row in rows if row["name"] == "pipeops-ReconcilerSilent"]
    assert ", virtual " in silent["reason"]


def test_alarms_check_agrees_with_the_engine_on_a_healthy_sandbox(make_sandbox: Any) -> None:
    """The sandbox's engine judges in virtual time; so does `alarms check`, given its clock."""
    from alarms.live import SandboxClock, check_alarms

    sandbox = make_sandbox(time_scale=TimeScale(0.02))
    wait_virtual(sandbox, 12)  # a few reconciler runs
    clock = SandboxClock.from_dict(sandbox.alarms.clock_info())
    checks = {c.name: c for c in check_alarms(sandbox.client("cloudwatch"), "pipeops", datetime.now(UTC), clock)}
    assert checks["pipeops-ReconcilerSilent"].verdict == "OK"
    assert ", virtual " in checks["pipeops-ReconcilerSilent"].reason
    assert [name for name, check in checks.items() if check.verdict == "ALARM"] == []


STALL_ALARMS = ("CounterDrift", "SlotsFullIdle", "BacklogStalled")


def test_a_lost_status_event_pages_drift_and_stall_and_reconcile_clears_them(make_sandbox: Any) -> None:
    # The scheduled reconciler reports without repairing, so the drift stays until someone acts.
    # CounterDrift needs three 5-minute periods: one virtual minute is 1.2 s here, not the default 3 s.
    # The leaked slot counts as drift once its execution has ended longer than the grace ago: the
    # grace is real seconds (120 by default), and report-only passes cannot release a slot in transit.
    sandbox = make_sandbox(
        MaxConcurrentWorkflows="1",
        ReconcileApply="false",
        ReconcileGraceSeconds="5",
        BacklogStallSeconds="10",
        time_scale=TimeScale(0.02),
    )
    rule = sandbox.deployment.resources["WorkflowTrackerFunctionExecutionStatusChange"]
    sandbox.bus.pause_rule(rule)  # the tracker never hears the first execution end: its slot leaks
    put = sandbox.client("s3").put_object
    bucket = sandbox.outputs["InputBucketName"]
    put(Bucket=bucket, Key="first.txt", Body=b"mail ann@corp.example\n")
    wait_for(lambda: [r.status for r in runs(sandbox)] == [JobStatus.COMPLETE], 300, "the first run", every=0.5)
    put(Bucket=bucket, Key="second.txt", Body=b"mail bob@corp.example\n")  # waits for a slot forever

    wait_for(lambda: all(alarm_states(sandbox).get(a) == "ALARM" for a in STALL_ALARMS), 600, "the stall alarms", every=0.5)
    seen = alarm_states(sandbox)
    assert seen["PipelineUnhealthy"] == "ALARM"
    status = CliRunner().invoke(app, ["status", "--json"])
    firing = {f["name"] for f in envelope(status.output, "status")["findings"] if f["source"] == "alarm"}
    assert set(STALL_ALARMS) <= firing

    repaired = CliRunner().invoke(app, ["reconcile", "--apply", "--grace-seconds", "0", "--json"])
    assert [a["kind"] for a in envelope(repaired.output, "reconcile")["actions"]] == ["release_holder"]
    sandbox.bus.resume_rule(rule)  # the held event is delivered late: the tracker finds no holder
    wait_for(lambda: all(r.status is JobStatus.COMPLETE for r in runs(sandbox)) and len(runs(sandbox)) == 2, 300, "the second run", every=0.5)
    wait_for(lambda: all(alarm_states(sandbox).get(a) == "OK" for a in STALL_ALARMS), 600, "the alarms to clear", every=0.5)
    state = Semaphore(sandbox.outputs["CoordinationTableName"], sandbox.client("dynamodb")).read()
    assert state.active_count == 0 and state.holders == {}


def test_a_count_below_its_holders_pages_until_the_reconciler_sets_it_right(make_sandbox: Any) -> None:
    """Drift the other way: a count hand-set to -3 (admission trusted it alone, and 5 ran at max 2).
    The reconciler's next run sees CounterDrift -3 and sets the count; CounterBelowRunning fires on
    that run, pages through the composite, and returns to OK on the next."""
    sandbox = make_sandbox(ReconcileSchedule="rate(1 minute)", time_scale=TimeScale(0.02))
    sandbox.client("dynamodb").update_item(
        TableName=sandbox.outputs["CoordinationTableName"],
        Key={"doc_key": {"S": "workflow_counter"}},
        UpdateExpression="SET active_count = :n ADD version :one",
        ExpressionAttributeValues={":n": {"N": "-3"}, ":one": {"N": "1"}},
    )
    wait_for(lambda: alarm_states(sandbox).get("CounterBelowRunning") == "ALARM", 300, "the below-count alarm", every=0.5)
    assert alarm_states(sandbox)["CounterDrift"] != "ALARM"  # the other side is not this one
    wait_for(lambda: alarm_states(sandbox).get("CounterBelowRunning") == "OK", 300, "the alarm back to OK", every=0.5)
    page = sandbox.deployment.resources["AlarmTopic"]
    paged = [(t.alarm_name, t.new_state.value) for t in sandbox.alarms.transitions if page in t.notified]
    assert paged == [("pipeops-PipelineUnhealthy", "ALARM")]
