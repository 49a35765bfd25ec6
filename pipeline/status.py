"""The one job-status enum, its order, and which transitions are legal.

Everything that writes a status (handlers, the state machine's DynamoDB tasks, the reconciler)
derives its condition from here, so "forward only" means the same thing everywhere.
"""

from __future__ import annotations

from enum import StrEnum


class JobStatus(StrEnum):
    QUEUED = "QUEUED"
    IN_PROGRESS = "IN_PROGRESS"
    DETECTING = "DETECTING"
    DETECT_COMPLETE = "DETECT_COMPLETE"
    GENERATING_SYNTHETIC = "GENERATING_SYNTHETIC"
    SYNTHETIC_COMPLETE = "SYNTHETIC_COMPLETE"
    REDACTING = "REDACTING"
    REDACT_COMPLETE = "REDACT_COMPLETE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATUSES

    @property
    def is_active(self) -> bool:
        return self not in TERMINAL_STATUSES


# The forward path, in order. FAILED is reachable from any active status.
LIFECYCLE: tuple[JobStatus, ...] = (
    JobStatus.QUEUED,
    JobStatus.IN_PROGRESS,
    JobStatus.DETECTING,
    JobStatus.DETECT_COMPLETE,
    JobStatus.GENERATING_SYNTHETIC,
    JobStatus.SYNTHETIC_COMPLETE,
    JobStatus.REDACTING,
    JobStatus.REDACT_COMPLETE,
    JobStatus.COMPLETE,
)
TERMINAL_STATUSES = frozenset({JobStatus.COMPLETE, JobStatus.FAILED})
# The one definition of "active": every status a running (or about to run) job can hold.
ACTIVE_STATUSES: tuple[JobStatus, ...] = tuple(s for s in LIFECYCLE if s not in TERMINAL_STATUSES)

_RANK = {status: rank for rank, status in enumerate(LIFECYCLE)}


def can_transition(current: JobStatus | None, target: JobStatus) -> bool:
    """Whether a record in `current` may be written as `target`.

    Forward moves may skip steps (blackout never generates synthetic data); rewriting the same
    active status is allowed so a retried task is idempotent; terminal records never change.
    `current` None means no record exists yet: only QUEUED may create one.
    """
    if current is None:
        return target is JobStatus.QUEUED
    if current.is_terminal:
        return False
    if target is JobStatus.FAILED:
        return True
    return _RANK[target] >= _RANK[current]


def allowed_predecessors(target: JobStatus) -> tuple[JobStatus, ...]:
    """Every existing status from which `target` may be written, in lifecycle order."""
    return tuple(s for s in (*LIFECYCLE, JobStatus.FAILED) if can_transition(s, target))


class ExecutionStatus(StrEnum):
    """A Step Functions execution's status, as DescribeExecution and the status events say it."""

    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"
    ABORTED = "ABORTED"
    PENDING_REDRIVE = "PENDING_REDRIVE"

    @property
    def is_terminal(self) -> bool:
        """Ended: it holds no slot's worth of work any more (a redrive starts it anew)."""
        return self in TERMINAL_EXECUTION_STATUSES

    @property
    def is_failure(self) -> bool:
        return self in FAILED_EXECUTION_STATUSES


FAILED_EXECUTION_STATUSES = frozenset({ExecutionStatus.FAILED, ExecutionStatus.TIMED_OUT, ExecutionStatus.ABORTED})
TERMINAL_EXECUTION_STATUSES = FAILED_EXECUTION_STATUSES | {ExecutionStatus.SUCCEEDED}


class FileOutcome(StrEnum):
    """What a per-file task says of its file: the `outcome` of its result and of its Map item."""

    OK = "ok"  # detected: text, with its entities counted
    EMPTY = "empty"  # detected: no text (written out empty, counted apart)
    REDACTED = "redacted"  # its redacted copy is written
    SKIPPED = "skipped"  # redaction: nothing to redact, its detection failed
    FAILED = "failed"  # the task failed on it (error and cause are stored)


class FailedFileKind(StrEnum):
    """The lists of a run's `failed_files`: the files that were not redacted, and why."""

    DETECT = "detect"  # detection failed: {key, error, message}
    REDACT = "redact"  # redaction failed: {key, error, message}
    UNSUPPORTED = "unsupported"  # an extension the pipeline does not read: its key
    EMPTY = "empty"  # no text: its key (written out empty; not a failure)


def empty_failed_files() -> dict[str, list[object]]:
    """A run's `failed_files` with nothing in any list."""
    return {kind.value: [] for kind in FailedFileKind}


class DeadlineCount(StrEnum):
    """A run's `deadline_counted`: who counted its files for the on-time objective, and as what
    (pipeline/deadline.py). Set once, by a conditional write; absent until then."""

    ENDED = "ended"  # at its terminal outcome: on time or late
    OVERDUE = "overdue"  # by the reconciler, with no outcome past the deadline
