"""DLQ redrives on the sandbox (runbooks.automation.engine.run_runbook), each DLQ filled for real or as SQS
fills it: a dry run changes nothing and exits 1 with the evidence; an applied run clears the DLQ,
writes an audit record and exits 0; a run after that has nothing to do. A redriven message starts
a run at most once, however many redrives and copies; one that fails again is quarantined."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest

from pipeline.jobs import RunRef, format_timestamp
from pipeline.status import JobStatus
from pipeline.stores.audit import AuditStream, audit_prefix
from pipeline.stores.semaphore import Semaphore
from pipeline.stores.tracking import RunRecord, TrackingStore
from runbooks.automation.engine import run_runbook
from runbooks.automation.result import RunbookResult
from stack.resources import StackResources
from tests.conftest import depth, held_off, job_message, put, runs, send, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def sandbox(make_sandbox: Any) -> Any:
    """The scheduled reconciler held off, so that it re-announces no run the test leaves QUEUED."""
    return held_off(make_sandbox())


def runbook(sandbox: Any, runbook_id: str, *, apply: bool) -> RunbookResult:
    resources = StackResources.from_outputs(sandbox.stack_name, dict(sandbox.outputs))
    return run_runbook(runbook_id, resources, sandbox, apply=apply, rate=0)


def executions(sandbox: Any) -> Counter[str]:
    pages = sandbox.client("stepfunctions").get_paginator("list_executions").paginate(stateMachineArn=sandbox.outputs["StateMachineArn"])
    return Counter(execution["name"] for page in pages for execution in page["executions"])


def audits(sandbox: Any) -> list[dict[str, Any]]:
    items = sandbox.client("dynamodb").scan(TableName=sandbox.outputs["CoordinationTableName"])["Items"]
    return [item for item in items if item["doc_key"]["S"].startswith(audit_prefix(AuditStream.RUNBOOK))]  # the runbook stream


def is_terminal_status(event: dict[str, Any]) -> bool:
    return event.get("detail-type") == "Step Functions Execution Status Change" and event["detail"]["status"] == "SUCCEEDED"


def route(sandbox: Any, *, enabled: bool) -> None:
    """Turn the router's event source mapping on or off (the poller follows at once)."""
    client = sandbox.client("lambda")
    [mapping] = client.list_event_source_mappings(FunctionName=sandbox.outputs["RouterFunctionName"])["EventSourceMappings"]
    client.update_event_source_mapping(UUID=mapping["UUID"], Enabled=enabled)
    sandbox.poller.refresh()
    if not enabled:  # a poller in the middle of a receive could still take one: wait for it to end
        wait_for(lambda: not any(thread.is_alive() for thread in sandbox.poller.threads), 30)


def dead_letter_the_main_queue(sandbox: Any, expected: int) -> None:
    """What SQS does to messages the router failed maxReceiveCount times: move them to the DLQ."""
    sqs = sandbox.client("sqs")
    wait_for(lambda: depth(sandbox, "MainQueueUrl") == expected)
    moved = 0
    while moved < expected:
        for message in sqs.receive_message(QueueUrl=sandbox.outputs["MainQueueUrl"], MaxNumberOfMessages=10).get("Messages", []):
            send(sandbox, "DeadLetterQueueUrl", message["Body"])
            sqs.delete_message(QueueUrl=sandbox.outputs["MainQueueUrl"], ReceiptHandle=message["ReceiptHandle"])
            moved += 1


def queued_runs_in_the_dlq(sandbox: Any, keys: list[str], copies: int = 1) -> list[RunRecord]:
    """Runs created by ingest whose messages never reached the router and sit in the DLQ."""
    route(sandbox, enabled=False)
    for key in keys:
        put(sandbox, key)
    dead_letter_the_main_queue(sandbox, len(keys))
    queued = runs(sandbox)
    for run in queued:
        for _ in range(copies - 1):
            send(sandbox, "DeadLetterQueueUrl", job_message(sandbox, run.run))
    route(sandbox, enabled=True)
    assert len(queued) == len(keys) and all(r.status is JobStatus.QUEUED for r in queued)
    return queued


def assert_dry_then_applied_then_nothing(sandbox: Any, runbook_id: str, output: str, groups: int) -> RunbookResult:
    before = depth(sandbox, output)
    dry = runbook(sandbox, runbook_id, apply=False)
    assert dry.exit_code == 1, dry.to_dict()
    assert len(dry.evidence["groups"]) == groups and dry.evidence["read"] == before
    assert {a.result.value for a in dry.actions} == {"skipped"} and dry.verified is None
    assert depth(sandbox, output) == before and audits(sandbox) == []  # the held messages were given back

    applied = runbook(sandbox, runbook_id, apply=True)
    assert applied.exit_code == 0, applied.to_dict()
    assert applied.verified is not None and applied.verified["remaining"] == 0
    assert len(audits(sandbox)) == groups
    assert all(a["by"]["S"] and a["action"]["S"] in ("redrive", "replay", "quarantine") for a in audits(sandbox))

    again = runbook(sandbox, runbook_id, apply=True)
    assert again.exit_code == 0 and again.verdict.value == "absent" and again.plan == []
    return applied


def test_redriving_messages_of_runs_that_completed_starts_nothing(sandbox: Any) -> None:
    for key in ("done-1.txt", "done-2.txt"):
        put(sandbox, key)
    assert sandbox.wait_until_idle(180)
    completed = runs(sandbox)
    assert len(completed) == 2 and all(r.status is JobStatus.COMPLETE for r in completed)
    started = executions(sandbox)
    for run in completed:  # a redelivery that failed after its run ended, dead-lettered by SQS
        send(sandbox, "DeadLetterQueueUrl", job_message(sandbox, run.run))

    applied = assert_dry_then_applied_then_nothing(sandbox, "dlq-messages", "DeadLetterQueueUrl", groups=2)
    assert {g["reason"] for g in applied.evidence["groups"]} == {"run_complete"}
    assert {a.action.kind for a in applied.actions} == {"redrive"}
    assert sandbox.wait_until_idle(120)
    assert executions(sandbox) == started  # the router saw ended runs: no StartExecution
    assert [r.status for r in runs(sandbox)] == [JobStatus.COMPLETE] * 2
    assert depth(sandbox, "MainQueueUrl") == depth(sandbox, "DeadLetterQueueUrl") == 0


def test_redriving_runs_that_never_started_completes_every_file_once(sandbox: Any) -> None:
    keys = ["never-1.txt", "never-2.txt", "never-3.txt"]
    queued = queued_runs_in_the_dlq(sandbox, keys)
    assert executions(sandbox) == Counter()

    applied = assert_dry_then_applied_then_nothing(sandbox, "dlq-messages", "DeadLetterQueueUrl", groups=3)
    assert {g["reason"] for g in applied.evidence["groups"]} == {"run_queued"}
    assert sandbox.wait_until_idle(180)
    done = runs(sandbox)
    assert [r.status for r in done] == [JobStatus.COMPLETE] * 3
    assert sorted(key for r in done for key in r.files) == keys  # each file in exactly one run
    assert executions(sandbox) == Counter({r.run.execution_name: 1 for r in queued})
    sample = json.dumps(applied.evidence)
    assert "ann@corp.example" not in sample  # ids and keys only, never a file's content


def test_two_redrives_at_once_start_each_run_once(sandbox: Any) -> None:
    keys = [f"twice-{index}.txt" for index in range(4)]
    queued = queued_runs_in_the_dlq(sandbox, keys, copies=2)  # every run's message twice
    barrier = threading.Barrier(2)
    results: list[RunbookResult] = []
    errors: list[BaseException] = []

    def redrive() -> None:
        barrier.wait()
        try:
            results.append(runbook(sandbox, "dlq-messages", apply=True))
        except BaseException as exc:  # surfaced below: a thread's exception is otherwise only printed
            errors.append(exc)

    threads = [threading.Thread(target=redrive) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == [] and len(results) == 2, errors
    reports = [r.to_dict() for r in results]
    assert all(r.exit_code in (0, 1) for r in results), reports
    handled = sum(outcome.action.count for r in results for outcome in r.actions)
    # Every message acted on; a standard queue may hand one message to both receivers (at-least-once
    # delivery, as moto's threads do under load), so only the runs below must be exactly once.
    assert handled >= 2 * len(keys), reports
    assert sandbox.wait_until_idle(180)
    assert executions(sandbox) == Counter({r.run.execution_name: 1 for r in queued})
    assert all(r.status is JobStatus.COMPLETE for r in runs(sandbox)), runs(sandbox)
    assert depth(sandbox, "DeadLetterQueueUrl") == depth(sandbox, "MainQueueUrl") == 0


def test_a_message_that_fails_again_is_quarantined_not_redriven_forever(sandbox: Any) -> None:
    sqs = sandbox.client("sqs")
    # A run the router can never route: DETECTING with no execution of its name (inconsistent_run).
    tracking = TrackingStore(sandbox.outputs["TrackingTableName"], sandbox.client("dynamodb"))
    now = datetime.now(UTC)
    stuck = RunRef("stuck.txt", format_timestamp(now))
    assert tracking.create_run(stuck, ["stuck.txt"], sandbox.outputs["InputBucketName"], now)
    sandbox.client("dynamodb").update_item(
        TableName=sandbox.outputs["TrackingTableName"],
        Key={"job_id": {"S": stuck.job_id}, "started_at": {"S": stuck.started_at}},
        UpdateExpression="SET #s = :s, active_status = :s",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":s": {"S": JobStatus.DETECTING.value}},
    )
    # One failed receive sends it to the DLQ (the template says 5: the same path, five times slower).
    dlq_arn = sqs.get_queue_attributes(QueueUrl=sandbox.outputs["DeadLetterQueueUrl"], AttributeNames=["QueueArn"])
    policy = {"deadLetterTargetArn": dlq_arn["Attributes"]["QueueArn"], "maxReceiveCount": "1"}
    sqs.set_queue_attributes(QueueUrl=sandbox.outputs["MainQueueUrl"], Attributes={"RedrivePolicy": json.dumps(policy)})
    send(sandbox, "DeadLetterQueueUrl", job_message(sandbox, stuck))
    send(sandbox, "DeadLetterQueueUrl", "not a job message")

    first = runbook(sandbox, "dlq-messages", apply=True)
    assert first.exit_code == 0, first.to_dict()
    assert sorted(a.action.kind for a in first.actions) == ["quarantine", "redrive"]  # malformed: never redriven
    wait_for(lambda: depth(sandbox, "DeadLetterQueueUrl") == 1, 180)  # the router failed it again

    second = runbook(sandbox, "dlq-messages", apply=True)
    assert second.exit_code == 0, second.to_dict()
    [action] = second.actions
    assert action.action.kind == "quarantine" and "failed again after a redrive" in action.action.reason
    parked = sqs.receive_message(QueueUrl=sandbox.outputs["QuarantineQueueUrl"], MaxNumberOfMessages=10, MessageAttributeNames=["All"])
    reasons = sorted(m["MessageAttributes"]["pipeops-reason"]["StringValue"] for m in parked["Messages"])
    assert len(reasons) == 2 and "failed again after a redrive" in reasons[0] and reasons[1].startswith("malformed_message")
    time.sleep(2)
    assert depth(sandbox, "DeadLetterQueueUrl") == depth(sandbox, "MainQueueUrl") == 0  # no loop
    assert executions(sandbox) == Counter()


def test_event_dlqs_are_replayed_through_their_own_functions_and_a_slot_is_released_once(sandbox: Any) -> None:
    resources = sandbox.deployment.resources
    ingest_rule, tracker_rule = resources["IngestFunctionObjectCreated"], resources["WorkflowTrackerFunctionExecutionStatusChange"]
    sandbox.bus.pause_rule(ingest_rule)
    sandbox.bus.pause_rule(tracker_rule)
    put(sandbox, "late.txt")
    assert sandbox.bus.wait_until_idle(30)  # the upload event is held at the paused rule
    assert sandbox.bus.expire_held(ingest_rule) == 1  # ingest never heard of the upload
    assert runs(sandbox) == []

    assert_dry_then_applied_then_nothing(sandbox, "ingest-dlq", "IngestDeadLetterQueueUrl", groups=1)
    wait_for(lambda: [r.status for r in runs(sandbox)] == [JobStatus.COMPLETE], 180)
    semaphore = Semaphore(sandbox.outputs["CoordinationTableName"], sandbox.client("dynamodb"))
    wait_for(lambda: any(is_terminal_status(e) for e in sandbox.bus.emitted_events()), 60)
    assert sandbox.bus.wait_until_idle(30)
    assert sandbox.bus.expire_held(tracker_rule) == 1  # the tracker never heard the execution end
    assert depth(sandbox, "TrackerDeadLetterQueueUrl") == 1 and semaphore.read().active_count == 1  # the slot leaked
    event = sandbox.client("sqs").receive_message(QueueUrl=sandbox.outputs["TrackerDeadLetterQueueUrl"], VisibilityTimeout=0)
    body = event["Messages"][0]["Body"]

    for audit in audits(sandbox):  # the ingest replay's record, so the next check counts the tracker's
        sandbox.client("dynamodb").delete_item(TableName=sandbox.outputs["CoordinationTableName"], Key={"doc_key": audit["doc_key"]})
    assert_dry_then_applied_then_nothing(sandbox, "tracker-dlq", "TrackerDeadLetterQueueUrl", groups=1)
    state = semaphore.read()
    assert state.active_count == 0 and state.holders == {}

    send(sandbox, "TrackerDeadLetterQueueUrl", body)  # the same event dead-lettered twice
    again = runbook(sandbox, "tracker-dlq", apply=True)
    assert again.exit_code == 0 and [a.result.value for a in again.actions] == ["applied"]
    state = semaphore.read()
    assert state.active_count == 0 and state.holders == {}  # released once: no second release


def test_the_command_asks_before_acting_and_prints_the_runbook_envelope(sandbox: Any) -> None:
    from typer.testing import CliRunner

    from pipeops.cli import app
    from tests.conftest import envelope

    send(sandbox, "DeadLetterQueueUrl", "not a job message")
    runner = CliRunner()
    dry = runner.invoke(app, ["runbook", "run", "dlq-messages", "--json"])
    assert dry.exit_code == 1, dry.output
    data = envelope(dry.output, "runbook")
    assert {"id", "evidence", "plan", "actions", "verified"} <= set(data)
    assert [g["reason"] for g in data["evidence"]["groups"]] == ["malformed_message"]

    refused = runner.invoke(app, ["runbook", "run", "dlq-messages", "--apply"], input="n\n")
    assert refused.exit_code == 1 and "Carry out these 1 action(s)?" in refused.output
    assert depth(sandbox, "DeadLetterQueueUrl") == 1 and audits(sandbox) == []

    applied = runner.invoke(app, ["runbook", "run", "dlq-messages", "--apply", "--yes", "--json"])
    assert applied.exit_code == 0, applied.output
    assert [a["kind"] for a in envelope(applied.output, "runbook")["actions"]] == ["quarantine"]
    assert depth(sandbox, "QuarantineQueueUrl") == 1 and len(audits(sandbox)) == 1

    again = runner.invoke(app, ["runbook", "run", "dlq-messages", "--apply"])
    assert again.exit_code == 0 and "verdict: absent" in again.output
