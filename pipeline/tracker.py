"""The workflow tracker: react to "Step Functions Execution Status Change" events.

A terminal status releases the execution's slot (by holder, so a duplicate event releases
nothing) and, for FAILED / TIMED_OUT / ABORTED, marks the run FAILED with the error and cause:
both are the shared repairs of `pipeline.repairs`, which the batch reclaim and the reconciler use.
Every failure to do that work raises, so EventBridge retries the event and, in the end, parks it
in the rule's DLQ: nothing is swallowed (docs/ARCHITECTURE.md#swallowed-tracker-errors).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from pipeline.jobs import RunRef, execution_name_from_arn
from pipeline.repairs import MarkOutcome, mark_run_from_outcome, release_holder
from pipeline.status import TERMINAL_EXECUTION_STATUSES
from pipeline.stores.protocols import SemaphoreProtocol, TrackingProtocol
from pipeline.stores.semaphore import ReleaseResult
from pipeline.stores.tracking import RunRecord


@dataclass(frozen=True)
class StatusChange:
    """The parts of an execution status-change event the tracker acts on."""

    execution_arn: str
    status: str
    run: RunRef | None
    error: str | None = None
    cause: str | None = None
    start_ms: int | None = None
    stop_ms: int | None = None

    @property
    def execution_name(self) -> str:
        return execution_name_from_arn(self.execution_arn)

    @property
    def duration_seconds(self) -> float | None:
        if self.start_ms is None or self.stop_ms is None:
            return None
        return max(0.0, (self.stop_ms - self.start_ms) / 1000)

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> StatusChange:
        detail = event.get("detail") or {}
        run = None
        try:
            data = json.loads(detail.get("input") or "{}")
        except json.JSONDecodeError:
            data = {}
        if isinstance(data, dict) and isinstance(data.get("job_id"), str) and isinstance(data.get("started_at"), str):
            run = RunRef(data["job_id"], data["started_at"])
        return cls(
            execution_arn=detail["executionArn"],
            status=detail["status"],
            run=run,
            error=detail.get("error"),
            cause=detail.get("cause"),
            start_ms=detail.get("startDate"),
            stop_ms=detail.get("stopDate"),
        )


class TrackOutcome(StrEnum):
    IGNORED = "ignored"  # not terminal
    RELEASED = "released"
    DUPLICATE = "duplicate"  # slot already released: a repeated or late event


@dataclass(frozen=True)
class TrackResult:
    outcome: TrackOutcome
    marked_failed: bool = False
    record: RunRecord | None = None
    refused_write: bool = False  # the FAILED mark was refused: the run had already ended otherwise


def track(change: StatusChange, store: TrackingProtocol, semaphore: SemaphoreProtocol, now: datetime) -> TrackResult:
    if change.status not in TERMINAL_EXECUTION_STATUSES:
        return TrackResult(TrackOutcome.IGNORED)
    released = release_holder(semaphore, change.execution_name)
    outcome = TrackOutcome.RELEASED if released is ReleaseResult.RELEASED else TrackOutcome.DUPLICATE
    if change.run is None:
        return TrackResult(outcome)
    # A refused write means the run is already terminal (the workflow or a reclaim got there first):
    # already FAILED is agreement; COMPLETE means the execution's outcome and the run's disagree.
    mark = mark_run_from_outcome(store, change.run, change.status, change.error, change.cause, now)
    return TrackResult(
        outcome,
        marked_failed=mark.marked,
        record=mark.record if mark.marked else None,
        refused_write=mark.outcome is MarkOutcome.DISAGREES,
    )
