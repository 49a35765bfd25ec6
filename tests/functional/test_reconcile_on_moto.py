"""The reconciler against moto: dry run changes nothing, apply repairs and audits, again finds nothing;
every write conditional on what was observed."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from monitors.reconcile.loop import ActionResult, Reconciler, reconcile
from pipeline.config import ReconcileSettings
from pipeline.jobs import JobMessage, RunRef, format_timestamp
from pipeline.status import JobStatus
from pipeline.stores.audit import AUDIT_PREFIX, AuditStore
from pipeline.stores.executions import ExecutionsStore
from pipeline.stores.run_index import RunIndex
from pipeline.stores.semaphore import Semaphore
from pipeline.stores.tracking import TrackingStore
from tests.conftest import drain_queue, emf_totals

NOW = datetime.now(UTC)
LONG_AGO = NOW - timedelta(minutes=30)


@pytest.fixture
def world(resources) -> dict[str, Any]:
    ddb = resources.client("dynamodb")
    sqs = resources.client("sqs")

    def send(message: JobMessage, delay: int) -> None:
        sqs.send_message(QueueUrl=resources.main_queue_url, MessageBody=message.to_json(), DelaySeconds=delay)

    tracking = TrackingStore(resources.tracking_table, ddb)
    reconciler = Reconciler(
        semaphore=Semaphore(resources.coordination_table, ddb),
        executions=ExecutionsStore(resources.client("stepfunctions"), resources.state_machine_arn),
        tracking=tracking,
        claims=tracking,
        runs=RunIndex(resources.tracking_table, ddb),
        send=send,
        audit=AuditStore(resources.coordination_table, ddb),
        settings=ReconcileSettings(max_slots=4, grace_seconds=60),
        actor="arn:aws:iam::123456789012:user/on-call",
        clock=lambda: datetime.now(UTC),
    )
    return {"reconciler": reconciler, "resources": resources, "ddb": ddb, "sfn": resources.client("stepfunctions")}


def audit_records(world: dict[str, Any]) -> list[dict[str, Any]]:
    items = world["ddb"].scan(TableName=world["resources"].coordination_table)["Items"]
    return [item for item in items if item["doc_key"]["S"].startswith(AUDIT_PREFIX)]


def started_run(world: dict[str, Any], job: str, status: JobStatus = JobStatus.DETECTING) -> RunRef:
    store: TrackingStore = world["reconciler"].tracking
    run = RunRef(job, format_timestamp(LONG_AGO))
    store.create_run(run, [f"{job}a.txt"], world["resources"].input_bucket, LONG_AGO)
    if status is not JobStatus.QUEUED:
        store.transition(run, status, LONG_AGO)
    return run


def start_execution(world: dict[str, Any], run: RunRef) -> str:
    return world["sfn"].start_execution(
        stateMachineArn=world["resources"].state_machine_arn,
        name=run.execution_name,
        input=json.dumps({"job_id": run.job_id, "started_at": run.started_at}),
    )["executionArn"]


def later(world: dict[str, Any], minutes: int = 5) -> None:
    """Move the reconciler's clock on: an execution that ended a moment ago is the tracker's first."""
    world["reconciler"] = replace(world["reconciler"], clock=lambda: datetime.now(UTC) + timedelta(minutes=minutes))


def test_a_leaked_slot_dry_run_then_apply_then_nothing_to_do(world) -> None:
    semaphore: Semaphore = world["reconciler"].semaphore
    run = started_run(world, "claims/")
    semaphore.acquire(run.execution_name, format_timestamp(LONG_AGO), 4)
    world["sfn"].stop_execution(executionArn=start_execution(world, run))  # ended; the tracker never heard
    assert reconcile(world["reconciler"], apply=False).plan.clean  # just ended: left to the tracker
    later(world)

    dry = reconcile(world["reconciler"], apply=False)
    assert [f.kind.value for f in dry.plan.findings] == ["leaked_slot"]
    assert {a.result for a in dry.applied} == {ActionResult.SKIPPED}
    assert set(semaphore.read().holders) == {run.execution_name} and audit_records(world) == []

    applied = reconcile(world["reconciler"], apply=True)
    assert [a.result for a in applied.applied] == [ActionResult.APPLIED, ActionResult.APPLIED]
    assert semaphore.read().holders == {} and semaphore.read().active_count == 0
    record = world["reconciler"].tracking.get_run(run)
    assert record is not None and record.status is JobStatus.FAILED
    audits = audit_records(world)
    assert {a["action"]["S"] for a in audits} == {"release_holder", "mark_run_failed"}
    assert {a["by"]["S"] for a in audits} == {"arn:aws:iam::123456789012:user/on-call"}
    assert applied.remaining_findings == 0

    again = reconcile(world["reconciler"], apply=True)
    assert again.plan.clean and again.applied == []


def test_the_stall_signature_is_repaired_to_the_holders(world) -> None:
    semaphore: Semaphore = world["reconciler"].semaphore
    world["ddb"].put_item(
        TableName=world["resources"].coordination_table,
        Item={"doc_key": {"S": "workflow_counter"}, "active_count": {"N": "4"}, "version": {"N": "9"}},
    )
    report = reconcile(world["reconciler"], apply=True)
    assert [f.kind.value for f in report.plan.findings] == ["count_mismatch"]
    assert semaphore.read().active_count == 0 and report.remaining_findings == 0


def test_a_count_repair_lands_though_slots_were_taken_after_the_observation(world) -> None:
    """On a busy semaphore every acquire and release bumps the version between a run's semaphore
    read and its repair: the count is set from a fresh read of the item, not lost to that race."""
    from monitors.reconcile.plan import plan

    reconciler: Reconciler = world["reconciler"]
    semaphore: Semaphore = reconciler.semaphore
    # Acquired now, not at the module's NOW (collected minutes earlier on a loaded machine): a
    # holder older than the grace would be released too, which is another test's subject.
    semaphore.acquire("router-a", format_timestamp(datetime.now(UTC)), 4)
    world["ddb"].update_item(
        TableName=world["resources"].coordination_table,
        Key={"doc_key": {"S": "workflow_counter"}},
        UpdateExpression="SET active_count = :n ADD version :one",
        ExpressionAttributeValues={":n": {"N": "-1"}, ":one": {"N": "1"}},
    )
    observed = reconciler.observe()
    decided = plan(observed)
    assert [a.kind.value for a in decided.actions] == ["set_count"]
    semaphore.acquire("router-b", format_timestamp(datetime.now(UTC)), 4)  # a router admits meanwhile: the version moves

    [recount] = reconciler.act(decided.actions, apply=True)
    assert recount.result is ActionResult.APPLIED
    state = semaphore.read()
    assert (state.active_count, set(state.holders)) == (2, {"router-a", "router-b"})
    [record] = [r for r in audit_records(world) if r["action"]["S"] == "set_count"]
    assert json.loads(record["after"]["S"]) == {"active_count": 2}  # what was written, not what was planned
    # Nothing left to repair: a second repair of the same plan writes nothing.
    [again] = reconciler.act(decided.actions, apply=True)
    assert again.result is ActionResult.RACE_LOST and semaphore.read().active_count == 2


def test_a_holder_restamped_after_the_observation_is_a_lost_race_not_a_release(world) -> None:
    reconciler: Reconciler = world["reconciler"]
    run = started_run(world, "late/", JobStatus.IN_PROGRESS)
    reconciler.semaphore.acquire(run.execution_name, format_timestamp(LONG_AGO), 4)
    observed = reconciler.observe()
    from monitors.reconcile.plan import plan

    decided = plan(observed)
    assert [a.kind.value for a in decided.actions] == ["release_holder", "reannounce_run"]
    # A router adopts the slot (re-stamps it) between the observation and the repair.
    world["ddb"].update_item(
        TableName=world["resources"].coordination_table,
        Key={"doc_key": {"S": "workflow_counter"}},
        UpdateExpression="SET holders.#h = :now ADD version :one",
        ExpressionAttributeNames={"#h": run.execution_name},
        ExpressionAttributeValues={":now": {"S": format_timestamp(datetime.now(UTC))}, ":one": {"N": "1"}},
    )
    [release, *_] = reconciler.act(decided.actions, apply=True)
    assert release.result is ActionResult.RACE_LOST
    assert set(reconciler.semaphore.read().holders) == {run.execution_name}


def test_a_slot_whose_router_died_is_released_and_its_run_announced_again(world) -> None:
    reconciler: Reconciler = world["reconciler"]
    run = started_run(world, "dead/", JobStatus.IN_PROGRESS)
    reconciler.semaphore.acquire(run.execution_name, format_timestamp(LONG_AGO), 4)
    report = reconcile(reconciler, apply=True)
    assert [f.kind.value for f in report.plan.findings] == ["slot_without_execution"]
    assert reconciler.semaphore.read().holders == {}
    [message] = drain_queue(world["resources"].client("sqs"), world["resources"].main_queue_url)
    assert JobMessage.from_json(message["Body"]).run == run


def test_a_fresh_holder_with_no_execution_yet_is_never_released(world) -> None:
    reconciler: Reconciler = world["reconciler"]
    run = started_run(world, "fresh/", JobStatus.IN_PROGRESS)
    reconciler.semaphore.acquire(run.execution_name, format_timestamp(datetime.now(UTC)), 4)
    report = reconcile(reconciler, apply=True)
    assert report.plan.clean
    assert set(reconciler.semaphore.read().holders) == {run.execution_name}


def test_a_count_repair_on_a_changed_item_is_a_lost_race(world) -> None:
    semaphore: Semaphore = world["reconciler"].semaphore
    semaphore.acquire("someone", format_timestamp(datetime.now(UTC)), 4)
    state = semaphore.read()
    semaphore.acquire("another", format_timestamp(datetime.now(UTC)), 4)  # bumps the version
    assert semaphore.set_count(0, state.version) is False
    assert semaphore.read().active_count == 2


def test_the_lambda_applies_on_schedule_plans_on_demand_and_emits_every_metric(
    world, lambda_context, capsys, monkeypatch
) -> None:
    from monitors.reconcile import handler as reconciler_lambda

    monkeypatch.setenv("RECONCILE_GRACE_SECONDS", "0")

    run = started_run(world, "lambda/")
    world["reconciler"].semaphore.acquire(run.execution_name, format_timestamp(LONG_AGO), 4)
    world["sfn"].stop_execution(executionArn=start_execution(world, run))

    dry = reconciler_lambda.handler({"dry_run": True}, lambda_context)
    assert [f["kind"] for f in dry["findings"]] == ["leaked_slot"] and dry["applied"] is False
    assert set(world["reconciler"].semaphore.read().holders) == {run.execution_name}

    scheduled = reconciler_lambda.handler({}, lambda_context)
    assert scheduled["applied"] is True and scheduled["remaining_findings"] == 0
    assert world["reconciler"].semaphore.read().holders == {}
    totals = emf_totals(capsys.readouterr().out)
    assert totals["ReconcileRuns"] == 2 and totals["LeakedSlotsReleased"] == 1
    assert totals["StuckRunsRepaired"] == 1 and totals["CounterDrift"] == 2  # 1 per run, before repair
    assert {"ConcurrencyActive", "WorkflowsRunning", "OrphanExecutions", "ReconcileRacesLost", "ImplausibleDrift"} <= set(totals)
