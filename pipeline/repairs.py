"""The repairs the tracker, the batch trigger's reclaim and the reconciler carry out, written once.

Three callers give a slot back or mark a run from what happened to its execution: the tracker on
a status event, the batch trigger on a run silent past the stale window, the reconciler on drift
it observed (docs/ARCHITECTURE.md#who-may-give-a-slot-back). Each repair here is one rule, so the three cannot drift apart:

- `release_holder`: give a slot back by holder, so a repeated release releases nothing; with the
  observed acquire time, only the very slot that was observed (a re-stamped or re-taken holder
  makes it a lost race, never a wrong release).
- `failure_fields` / `mark_run_from_outcome` / `mark_failed`: a failed end (FAILED, TIMED_OUT,
  ABORTED) marks the run FAILED with the execution's error and cause, by a conditional write that
  never moves a run backwards; a refused write says why (agreement, disagreement, lost race).
- `stop_and_fail_stale` / `finish_stale`: claim a stale run (FAILED, conditional on what was
  observed), then stop its execution, then give its slot back only once nothing runs under it.

Every write is conditional and every failure to act raises: the caller (EventBridge's retry, the
next batch tick, the next reconcile) tries again, and nothing here swallows an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from pipeline.jobs import RunRef
from pipeline.status import ExecutionStatus, JobStatus
from pipeline.stores.protocols import ExecutionsProtocol, SemaphoreProtocol, TrackingProtocol
from pipeline.stores.semaphore import ReleaseResult
from pipeline.stores.tracking import RunRecord

# A run's `cause` is for people to read; a stack trace in an execution's cause can be 32 KB.
MAX_CAUSE_CHARS = 1000
# The error a stale-run repair writes on the run and gives StopExecution.
STALE_ERROR = "StaleJobReclaimed"


def release_holder(semaphore: SemaphoreProtocol, name: str, *, acquired_at: str | None = None) -> ReleaseResult:
    """Give back the slot held for execution `name`; NOT_HELD when there is none to give back.

    Call it only where no execution of that name runs or can still start (docs/ARCHITECTURE.md#who-may-give-a-slot-back): the
    tracker on a terminal event, the stale repair once the execution is stopped or ended, the
    reconciler from an observed terminal execution. By holder, so a duplicate event or a second
    repair releases nothing. With `acquired_at` (what the reconciler observed), only that very
    holder is released: a router that adopted the slot since, or a holder released and taken
    again, has another acquire time and the release is a lost race (NOT_HELD).
    """
    if acquired_at is None:
        return semaphore.release(name)
    return semaphore.release_observed(name, acquired_at)


def default_error(status: ExecutionStatus) -> str:
    """The error a run gets when its execution ended without one: ExecutionFailed,
    ExecutionTimedOut, ExecutionAborted (a timeout or a StopExecution with no error given)."""
    return f"Execution{status.value.title().replace('_', '')}"


def failure_fields(status: ExecutionStatus | str, error: str | None, cause: str | None) -> dict[str, str]:
    """The `error` and `cause` a run is marked FAILED with, from its execution's end.

    The execution's own error and cause when it has them, else a default naming the status; the
    cause cut to MAX_CAUSE_CHARS so a long trace does not bloat every read of the run.
    """
    ended = ExecutionStatus(status)
    return {
        "error": error or default_error(ended),
        "cause": (cause or f"execution ended {ended.value}")[:MAX_CAUSE_CHARS],
    }


class MarkOutcome(StrEnum):
    """What marking a run FAILED did. Only MARKED wrote anything."""

    MARKED = "marked"
    NOTHING_TO_MARK = "nothing_to_mark"  # the execution did not fail (SUCCEEDED): the run is left alone
    ALREADY_FAILED = "already_failed"  # refused: the run is FAILED already (the workflow said so): agreement
    DISAGREES = "disagrees"  # refused: the run ended otherwise (COMPLETE): FAILED would move it backwards
    RACE_LOST = "race_lost"  # refused: the run is active but not as observed, or there is no such run


@dataclass(frozen=True)
class MarkResult:
    outcome: MarkOutcome
    # MARKED: the run as written. Refused: the run as read just after (None: no such run).
    record: RunRecord | None = None

    @property
    def marked(self) -> bool:
        return self.outcome is MarkOutcome.MARKED


def mark_failed(
    store: TrackingProtocol,
    run: RunRef,
    now: datetime,
    fields: Mapping[str, str],
    *,
    expected_status: JobStatus | None = None,
    expected_updated_at: str | None = None,
) -> MarkResult:
    """Mark `run` FAILED with `fields` (error, cause), by a write DynamoDB refuses unless it is legal.

    Without expectations any active run may fail; with them (the reconciler, the stale repair)
    only a run still exactly as observed, so a run that moved on is left alone. A refused write is
    read back once to tell agreement (already FAILED) from a disagreement worth a metric (the run
    COMPLETE, its execution failed) and from a lost race (still active, or gone).
    """
    record = store.transition(
        run,
        JobStatus.FAILED,
        now,
        fields=fields,
        expected_status=expected_status,
        expected_updated_at=expected_updated_at,
    )
    if record is not None:
        return MarkResult(MarkOutcome.MARKED, record)
    current = store.get_run(run)
    if current is None or current.status.is_active:
        return MarkResult(MarkOutcome.RACE_LOST, current)
    if current.status is JobStatus.FAILED:
        return MarkResult(MarkOutcome.ALREADY_FAILED, current)
    return MarkResult(MarkOutcome.DISAGREES, current)


def mark_run_from_outcome(
    store: TrackingProtocol,
    run: RunRef,
    status: ExecutionStatus | str,
    error: str | None,
    cause: str | None,
    now: datetime,
    *,
    expected_status: JobStatus | None = None,
    expected_updated_at: str | None = None,
) -> MarkResult:
    """Mark `run` from how its execution really ended: a failed end (FAILED, TIMED_OUT, ABORTED)
    makes it FAILED with the execution's error and cause; any other status leaves it alone
    (a SUCCEEDED workflow writes COMPLETE itself, in its last step)."""
    ended = ExecutionStatus(status)
    if not ended.is_failure:
        return MarkResult(MarkOutcome.NOTHING_TO_MARK)
    return mark_failed(
        store,
        run,
        now,
        failure_fields(ended, error, cause),
        expected_status=expected_status,
        expected_updated_at=expected_updated_at,
    )


@dataclass(frozen=True)
class StaleRepair:
    """What repairing a stale run did: the claim, then (only if it won) the slot's release."""

    mark: MarkResult
    released: ReleaseResult | None = None  # None: the claim was lost, nothing else was touched

    @property
    def reclaimed(self) -> RunRecord | None:
        """The run as written FAILED, or None when it had moved since it was observed."""
        return self.mark.record if self.mark.marked else None


def stop_and_fail_stale(
    store: TrackingProtocol,
    semaphore: SemaphoreProtocol,
    executions: ExecutionsProtocol,
    stale: RunRecord,
    now: datetime,
    *,
    stopped_by: str,
) -> StaleRepair:
    """Claim a stale run, then stop its execution, then give back its slot — in that order.

    The claim is the FAILED write, conditional on the status and updated_at observed: if the run
    moved since, it is not stale, and nothing at all is done. Only the winner of that write
    touches the execution and the slot, so an outdated observation can never stop a healthy run
    or free a slot still in use. `executions` derives the ARN of a run that never recorded one;
    `stopped_by` goes into the stop's cause.
    """
    mark = mark_failed(
        store,
        stale.run,
        now,
        {"error": STALE_ERROR, "cause": f"no progress since {stale.updated_at}; reclaimed"},
        expected_status=stale.status,
        expected_updated_at=stale.updated_at,
    )
    if not mark.marked:
        return StaleRepair(mark)
    assert mark.record is not None
    released = finish_stale(semaphore, executions, mark.record, stopped_by=stopped_by)
    return StaleRepair(mark, released)


def finish_stale(
    semaphore: SemaphoreProtocol, executions: ExecutionsProtocol, reclaimed: RunRecord, *, stopped_by: str
) -> ReleaseResult:
    """Stop a claimed run's execution if it runs, then release its slot. Idempotent.

    The slot is released only once the execution is known not to be running: stopped here,
    already ended, or never started. "Never started" is final: the run is FAILED, so no router
    can admit it again, and the router that admitted it last did so more than the stale window
    ago, far beyond its own timeout. A failing StopExecution raises with the slot still held,
    so a claim interrupted here is finished by calling this again (the batch trigger does, on
    its next tick, for a run FAILED as reclaimed).
    """
    arn = reclaimed.execution_arn or _derived_arn(executions, reclaimed.run)
    status = executions.status(arn)
    if status is not None and not status.is_terminal:
        try:
            executions.stop(arn, STALE_ERROR, f"reclaimed by {stopped_by}")
        except Exception:
            # It may have ended between the two calls; anything else leaves the slot held.
            after = executions.status(arn)
            if after is None or not after.is_terminal:
                raise
    return release_holder(semaphore, reclaimed.run.execution_name)


def _derived_arn(executions: ExecutionsProtocol, run: RunRef) -> str:
    """The deterministic ARN of the run's execution, for a run whose router never recorded it."""
    if not executions.state_machine_arn:
        raise ValueError("the run has no execution ARN recorded and no state machine ARN was given to derive it")
    return executions.arn_of(run.execution_name)
