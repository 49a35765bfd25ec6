"""The shared repairs on moto: release a holder, mark a run from its execution's end, stop and
fail a stale run. What the tracker, the batch reclaim and the reconciler rely on, said once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pipeline.jobs import RunRef, format_timestamp
from pipeline.repairs import (
    MAX_CAUSE_CHARS,
    STALE_ERROR,
    MarkOutcome,
    StaleRepair,
    failure_fields,
    finish_stale,
    mark_failed,
    mark_run_from_outcome,
    release_holder,
    stop_and_fail_stale,
)
from pipeline.status import ExecutionStatus, JobStatus
from pipeline.stores.executions import ExecutionsStore
from pipeline.stores.semaphore import ReleaseResult, Semaphore
from pipeline.stores.tracking import RunRecord, TrackingStore

NOW = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)
LONG_AGO = NOW - timedelta(minutes=45)
BY = "the test"


@pytest.fixture
def tracking(resources) -> TrackingStore:
    return TrackingStore(resources.tracking_table, resources.client("dynamodb"))


@pytest.fixture
def semaphore(resources) -> Semaphore:
    return Semaphore(resources.coordination_table, resources.client("dynamodb"))


@pytest.fixture
def sfn(resources) -> Any:
    return resources.client("stepfunctions")


def a_run(tracking: TrackingStore, status: JobStatus, job_id: str = "claims/", at: datetime = NOW) -> RunRef:
    run = RunRef(job_id, format_timestamp(at))
    tracking.create_run(run, [f"{job_id}a.txt"], "input", at)
    if status is not JobStatus.QUEUED:
        tracking.transition(run, status, at)
    return run


def record(tracking: TrackingStore, run: RunRef) -> RunRecord:
    found = tracking.get_run(run)
    assert found is not None
    return found


# -- release_holder ------------------------------------------------------------------------------


def test_a_duplicate_release_releases_nothing(semaphore) -> None:
    semaphore.acquire("exec-a", format_timestamp(NOW), 5)
    semaphore.acquire("exec-b", format_timestamp(NOW), 5)

    assert release_holder(semaphore, "exec-a") is ReleaseResult.RELEASED
    assert release_holder(semaphore, "exec-a") is ReleaseResult.NOT_HELD

    state = semaphore.read()
    assert state.active_count == 1 and set(state.holders) == {"exec-b"}


def test_a_release_conditional_on_an_outdated_acquire_time_loses(semaphore) -> None:
    observed = format_timestamp(NOW)
    semaphore.acquire("exec-a", observed, 5)
    release_holder(semaphore, "exec-a")
    semaphore.acquire("exec-a", format_timestamp(NOW + timedelta(seconds=5)), 5)  # taken again since

    assert release_holder(semaphore, "exec-a", acquired_at=observed) is ReleaseResult.NOT_HELD
    assert semaphore.read().active_count == 1 and "exec-a" in semaphore.read().holders


def test_a_release_conditional_on_the_observed_acquire_time_releases(semaphore) -> None:
    observed = format_timestamp(NOW)
    semaphore.acquire("exec-a", observed, 5)

    assert release_holder(semaphore, "exec-a", acquired_at=observed) is ReleaseResult.RELEASED
    assert semaphore.read().active_count == 0 and semaphore.read().holders == {}


# -- failure_fields ------------------------------------------------------------------------------


def test_a_timed_out_execution_without_error_gets_execution_timed_out() -> None:
    assert failure_fields(ExecutionStatus.TIMED_OUT, None, None) == {
        "error": "ExecutionTimedOut",
        "cause": "execution ended TIMED_OUT",
    }
    assert failure_fields("ABORTED", None, None)["error"] == "ExecutionAborted"
    assert failure_fields(ExecutionStatus.FAILED, None, None)["error"] == "ExecutionFailed"


def test_the_executions_own_error_is_kept_and_its_cause_truncated() -> None:
    fields = failure_fields(ExecutionStatus.FAILED, "States.TaskFailed", "x" * 5000)
    assert fields["error"] == "States.TaskFailed"
    assert fields["cause"] == "x" * MAX_CAUSE_CHARS


# -- mark_run_from_outcome / mark_failed ---------------------------------------------------------


def test_a_timed_out_execution_marks_its_run_failed_with_a_truncated_cause(tracking) -> None:
    run = a_run(tracking, JobStatus.DETECTING)

    result = mark_run_from_outcome(tracking, run, ExecutionStatus.TIMED_OUT, None, "y" * 2000, NOW)

    assert result.outcome is MarkOutcome.MARKED
    written = record(tracking, run)
    assert result.record == written
    assert (written.status, written.error, written.cause) == (JobStatus.FAILED, "ExecutionTimedOut", "y" * MAX_CAUSE_CHARS)


def test_a_succeeded_execution_leaves_the_run_alone(tracking) -> None:
    run = a_run(tracking, JobStatus.REDACTING)
    before = record(tracking, run)

    result = mark_run_from_outcome(tracking, run, ExecutionStatus.SUCCEEDED, None, None, NOW + timedelta(minutes=1))

    assert result.outcome is MarkOutcome.NOTHING_TO_MARK
    assert record(tracking, run) == before


def test_marking_a_complete_run_failed_disagrees_and_writes_nothing(tracking) -> None:
    run = a_run(tracking, JobStatus.COMPLETE)
    before = record(tracking, run)

    result = mark_run_from_outcome(tracking, run, "FAILED", "States.TaskFailed", "late", NOW + timedelta(minutes=1))

    assert result.outcome is MarkOutcome.DISAGREES and not result.marked
    assert record(tracking, run) == before  # still COMPLETE, same updated_at, no error


def test_marking_a_run_the_workflow_already_failed_is_agreement(tracking) -> None:
    run = a_run(tracking, JobStatus.DETECTING)
    tracking.transition(run, JobStatus.FAILED, NOW, fields={"error": "TooManyFailedFiles", "cause": "3 of 4"})
    before = record(tracking, run)

    result = mark_run_from_outcome(tracking, run, ExecutionStatus.FAILED, "States.Fail", "x", NOW + timedelta(minutes=1))

    assert result.outcome is MarkOutcome.ALREADY_FAILED
    assert record(tracking, run) == before  # the workflow's own reason is kept


def test_a_mark_conditional_on_an_observation_the_run_moved_past_loses_the_race(tracking) -> None:
    run = a_run(tracking, JobStatus.DETECTING)
    observed = record(tracking, run)
    tracking.transition(run, JobStatus.DETECT_COMPLETE, NOW + timedelta(seconds=30))  # the workflow moved on

    result = mark_failed(
        tracking,
        run,
        NOW + timedelta(minutes=1),
        {"error": "ReconcilerStuckRun", "cause": "observed stuck"},
        expected_status=observed.status,
        expected_updated_at=observed.updated_at,
    )

    assert result.outcome is MarkOutcome.RACE_LOST
    assert record(tracking, run).status is JobStatus.DETECT_COMPLETE


def test_marking_a_run_that_does_not_exist_loses_the_race(tracking) -> None:
    result = mark_run_from_outcome(tracking, RunRef("gone/", format_timestamp(NOW)), "FAILED", None, None, NOW)
    assert result.outcome is MarkOutcome.RACE_LOST and result.record is None


# -- stop_and_fail_stale / finish_stale ----------------------------------------------------------


def stale_run(resources, tracking, semaphore, sfn, *, record_arn: bool = True) -> tuple[RunRecord, str]:
    """A run silent for 45 min in DETECTING, its execution RUNNING, its slot held."""
    run = a_run(tracking, JobStatus.DETECTING, "stuck/", LONG_AGO)
    arn = sfn.start_execution(stateMachineArn=resources.state_machine_arn, name=run.execution_name, input="{}")[
        "executionArn"
    ]
    if record_arn:
        tracking.record_execution(run, arn, [])
    semaphore.acquire(run.execution_name, format_timestamp(LONG_AGO), 5)
    return record(tracking, run), arn


def reclaim(resources, tracking, semaphore, sfn, stale: RunRecord) -> StaleRepair:
    return stop_and_fail_stale(tracking, semaphore, ExecutionsStore(sfn, resources.state_machine_arn), stale, NOW, stopped_by=BY)


def finish(resources, semaphore, sfn, claimed: RunRecord) -> ReleaseResult:
    return finish_stale(semaphore, ExecutionsStore(sfn, resources.state_machine_arn), claimed, stopped_by=BY)


class StopRefused:
    """A Step Functions client whose StopExecution fails (throttled, denied) and changes nothing."""

    def __init__(self, sfn: Any) -> None:
        self._sfn = sfn
        self.stops = 0

    def describe_execution(self, **kwargs: Any) -> Any:
        return self._sfn.describe_execution(**kwargs)

    def stop_execution(self, **kwargs: Any) -> Any:
        from botocore.exceptions import ClientError

        self.stops += 1
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "StopExecution")


def test_a_stale_run_is_marked_failed_then_stopped_then_its_slot_released(resources, tracking, semaphore, sfn) -> None:
    stale, arn = stale_run(resources, tracking, semaphore, sfn)

    repair = reclaim(resources, tracking, semaphore, sfn, stale)

    assert repair.released is ReleaseResult.RELEASED
    assert repair.reclaimed is not None and repair.reclaimed.error == STALE_ERROR
    assert "no progress since" in (repair.reclaimed.cause or "")
    stopped = sfn.describe_execution(executionArn=arn)
    assert stopped["status"] == "ABORTED"  # (moto keeps no error for a stop)
    assert semaphore.read().holders == {} and semaphore.read().active_count == 0


def test_the_stale_repair_never_releases_a_slot_whose_execution_still_runs(resources, tracking, semaphore, sfn) -> None:
    stale, arn = stale_run(resources, tracking, semaphore, sfn)
    refusing = StopRefused(sfn)

    with pytest.raises(Exception, match="slow down"):
        reclaim(resources, tracking, semaphore, refusing, stale)

    assert refusing.stops == 1
    assert sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
    assert stale.run.execution_name in semaphore.read().holders  # still held: it still runs
    claimed = record(tracking, stale.run)
    assert claimed.status is JobStatus.FAILED and claimed.error == STALE_ERROR  # the claim came first

    # Finishing it later, once StopExecution works, stops it and only then gives the slot back.
    assert finish(resources, semaphore, sfn, claimed) is ReleaseResult.RELEASED
    assert sfn.describe_execution(executionArn=arn)["status"] == "ABORTED"
    assert semaphore.read().holders == {}


def test_a_stale_run_that_moved_since_it_was_observed_is_left_alone(resources, tracking, semaphore, sfn) -> None:
    stale, arn = stale_run(resources, tracking, semaphore, sfn)
    tracking.transition(stale.run, JobStatus.DETECT_COMPLETE, NOW)  # progress after the snapshot

    repair = reclaim(resources, tracking, semaphore, sfn, stale)

    assert repair.reclaimed is None and repair.released is None
    assert repair.mark.outcome is MarkOutcome.RACE_LOST
    assert sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
    assert stale.run.execution_name in semaphore.read().holders


def test_an_execution_whose_arn_was_never_recorded_is_found_by_its_name(resources, tracking, semaphore, sfn) -> None:
    stale, arn = stale_run(resources, tracking, semaphore, sfn, record_arn=False)

    repair = reclaim(resources, tracking, semaphore, sfn, stale)

    assert repair.released is ReleaseResult.RELEASED
    assert sfn.describe_execution(executionArn=arn)["status"] == "ABORTED"


def test_a_stale_run_whose_execution_never_started_has_its_slot_released(resources, tracking, semaphore, sfn) -> None:
    run = a_run(tracking, JobStatus.IN_PROGRESS, "neverstarted/", LONG_AGO)
    semaphore.acquire(run.execution_name, format_timestamp(LONG_AGO), 5)

    repair = reclaim(resources, tracking, semaphore, sfn, record(tracking, run))

    assert repair.released is ReleaseResult.RELEASED and semaphore.read().holders == {}


def test_finishing_a_stale_repair_twice_releases_once(resources, tracking, semaphore, sfn) -> None:
    stale, _ = stale_run(resources, tracking, semaphore, sfn)
    repair = reclaim(resources, tracking, semaphore, sfn, stale)
    assert repair.reclaimed is not None

    again = finish(resources, semaphore, sfn, repair.reclaimed)

    assert again is ReleaseResult.NOT_HELD
