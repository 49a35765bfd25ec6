"""Workflow tracker: releases by holder (a duplicate event releases nothing), marks failures."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pipeline.handlers import workflow_tracker
from pipeline.jobs import RunRef, execution_arn, format_timestamp
from pipeline.status import JobStatus
from pipeline.stores.semaphore import Semaphore
from pipeline.stores.tracking import TrackingStore
from tests.conftest import emf_totals

NOW = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)


def status_event(resources, run: RunRef, status: str, **extra: object) -> dict:
    return {
        "version": "0",
        "detail-type": "Step Functions Execution Status Change",
        "source": "aws.states",
        "detail": {
            "executionArn": execution_arn(resources.state_machine_arn, run.execution_name),
            "stateMachineArn": resources.state_machine_arn,
            "name": run.execution_name,
            "status": status,
            "startDate": 1_795_000_000_000,
            "stopDate": 1_795_000_042_000,
            "input": json.dumps({"job_id": run.job_id, "started_at": run.started_at}),
            **extra,
        },
    }


def started_run(resources, max_slots: int = 5) -> tuple[RunRef, TrackingStore, Semaphore]:
    store = TrackingStore(resources.tracking_table, resources.client("dynamodb"))
    sem = Semaphore(resources.coordination_table, resources.client("dynamodb"))
    run = RunRef("claims/", format_timestamp(NOW))
    store.create_run(run, ["claims/a.txt"], resources.input_bucket, NOW)
    store.transition(run, JobStatus.DETECTING, NOW)
    sem.acquire(run.execution_name, format_timestamp(NOW), max_slots)
    return run, store, sem


def test_the_same_event_twice_releases_once(resources, lambda_context) -> None:
    run, _, sem = started_run(resources)
    sem.acquire("someone-else", format_timestamp(NOW), 5)
    first = workflow_tracker.handler(status_event(resources, run, "SUCCEEDED"), lambda_context)
    second = workflow_tracker.handler(status_event(resources, run, "SUCCEEDED"), lambda_context)
    assert (first["outcome"], second["outcome"]) == ("released", "duplicate")
    state = sem.read()
    assert state.active_count == 1 and set(state.holders) == {"someone-else"}


def test_a_failed_execution_marks_the_run_failed_with_error_and_cause(resources, lambda_context) -> None:
    run, store, _ = started_run(resources)
    event = status_event(resources, run, "FAILED", error="States.TaskFailed", cause="detect raised")
    assert workflow_tracker.handler(event, lambda_context)["marked_failed"] is True
    record = store.get_run(run)
    assert record is not None
    assert (record.status, record.error, record.cause) == (JobStatus.FAILED, "States.TaskFailed", "detect raised")


def test_timed_out_and_aborted_executions_are_failures_too(resources, lambda_context) -> None:
    run, store, _ = started_run(resources)
    workflow_tracker.handler(status_event(resources, run, "TIMED_OUT"), lambda_context)
    record = store.get_run(run)
    assert record is not None and record.status is JobStatus.FAILED and record.error == "ExecutionTimedOut"


def test_a_failure_event_after_the_run_completed_changes_nothing(resources, lambda_context) -> None:
    run, store, _ = started_run(resources)
    store.transition(run, JobStatus.COMPLETE, NOW)
    result = workflow_tracker.handler(status_event(resources, run, "ABORTED"), lambda_context)
    assert result["marked_failed"] is False
    assert store.get_run(run).status is JobStatus.COMPLETE  # type: ignore[union-attr]


def test_running_events_are_ignored(resources, lambda_context) -> None:
    run, _, sem = started_run(resources)
    assert workflow_tracker.handler(status_event(resources, run, "RUNNING"), lambda_context)["outcome"] == "ignored"
    assert sem.read().active_count == 1


def test_it_raises_when_it_cannot_do_its_work_so_eventbridge_retries(resources, lambda_context, monkeypatch) -> None:
    run, _, _ = started_run(resources)
    monkeypatch.setenv("COORDINATION_TABLE", "no-such-table")
    from pipeline.handlers import _wiring

    _wiring.reset()
    import pytest
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError):
        workflow_tracker.handler(status_event(resources, run, "SUCCEEDED"), lambda_context)


def test_metrics_count_each_release_once_and_ignore_hand_started_executions(resources, lambda_context, capsys) -> None:
    run, _, _ = started_run(resources)
    workflow_tracker.handler(status_event(resources, run, "SUCCEEDED"), lambda_context)
    workflow_tracker.handler(status_event(resources, run, "SUCCEEDED"), lambda_context)
    hand_started = status_event(resources, run, "SUCCEEDED", input="{}", executionArn="arn:aws:states:::execution:m:by-hand")
    workflow_tracker.handler(hand_started, lambda_context)
    totals = emf_totals(capsys.readouterr().out)
    assert totals.get("SlotsReleased") == 1 and totals.get("JobsSucceeded") == 1
    assert totals.get("DuplicateReleases") == 1  # the repeated event, not the hand-started execution


def test_a_failure_event_for_a_completed_run_counts_a_stale_status_write(resources, lambda_context, capsys) -> None:
    run, store, _ = started_run(resources)
    store.transition(run, JobStatus.COMPLETE, NOW)
    workflow_tracker.handler(status_event(resources, run, "FAILED"), lambda_context)
    assert emf_totals(capsys.readouterr().out).get("StaleStatusWrites") == 1


def test_a_failure_the_workflow_already_recorded_is_no_stale_write(resources, lambda_context, capsys) -> None:
    run, store, _ = started_run(resources)
    store.transition(run, JobStatus.FAILED, NOW, fields={"error": "TooManyFailedFiles", "cause": "x"})
    workflow_tracker.handler(status_event(resources, run, "FAILED"), lambda_context)
    assert "StaleStatusWrites" not in emf_totals(capsys.readouterr().out)
