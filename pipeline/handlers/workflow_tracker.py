"""Workflow tracker: execution status change → release the slot, mark failures. Raises to retry."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pipeline.deadline import Verdict, count_ended
from pipeline.handlers import _wiring
from pipeline.jobs import utc_now
from pipeline.status import ExecutionStatus
from pipeline.telemetry import emit, logger
from pipeline.telemetry.catalog import Metric
from pipeline.telemetry.handler import instrumented
from pipeline.telemetry.logging import correlate
from pipeline.tracker import StatusChange, TrackOutcome, track


@instrumented("workflow_tracker")
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    change = StatusChange.from_event(event)
    correlate(execution_name=change.execution_name, job_id=change.run.job_id if change.run else None)
    result = track(change, _wiring.tracking_store(), _wiring.semaphore(), utc_now())
    if result.outcome is TrackOutcome.IGNORED:
        return {"outcome": result.outcome.value}
    if change.run is None:
        # Started by hand or redriven: it never held a slot, so its end is no duplicate release.
        logger.warning("execution has no job in its input: it was not started by the router")
    elif result.outcome is TrackOutcome.RELEASED:
        emit(Metric.SLOTS_RELEASED)
        emit(Metric.JOBS_SUCCEEDED if change.status == ExecutionStatus.SUCCEEDED else Metric.JOBS_FAILED)
        if change.duration_seconds is not None:
            emit(Metric.JOB_DURATION, change.duration_seconds)
    else:
        emit(Metric.DUPLICATE_RELEASES)
    if change.run is not None and ExecutionStatus(change.status).is_failure:
        # A failed execution's run ended by this tracker's mark, by the workflow's own FAILED
        # write, or by its verdict (which counted it already): counted here once, conditionally,
        # unless counted before or overdue. A success was counted by the verdict that made it.
        deadline = timedelta(minutes=_wiring.settings().file_deadline_minutes)
        counted = count_ended(_wiring.tracking_store(), change.run, deadline)
        if counted is not None:
            emit(Metric.FILES_ON_TIME if counted.verdict is Verdict.ON_TIME else Metric.FILES_LATE, counted.files)
    if result.refused_write:
        # The run was already terminal (the workflow or a reclaim got there first): marking it
        # FAILED now would move it backwards, and the conditional write refused to.
        emit(Metric.STALE_STATUS_WRITES)
    logger.info(
        "execution status change handled",
        extra={"status": change.status, "outcome": result.outcome.value, "marked_failed": result.marked_failed},
    )
    return {"outcome": result.outcome.value, "marked_failed": result.marked_failed}
