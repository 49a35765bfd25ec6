"""The router: admit a queued run into the workflow, or let its message wait for a slot.

Two invocations routing one run at once are normal (SQS delivers at least once, ingest
re-announces, a DLQ redrive gives a new message id), so each message is an observe → decide →
act loop over the run's record, with the decision a pure function (`next_step`) and every act a
conditional write that refuses a stale view (the loop then looks again):

- QUEUED → *admit*: take the slot and freeze the run (QUEUED → IN_PROGRESS) in one transaction,
  then StartExecution under the run's deterministic name and record the ARN. At capacity the
  message is re-sent with a delay and the original deleted, so waiting never counts toward the DLQ.
  A wait costs one call beyond the re-send: the run and the semaphore are read together (one
  BatchGetItem) and a full semaphore is not tried; a message that waited before first asks "still
  full?" in one conditional write that also renews the run's announcement lease.
- IN_PROGRESS, no ARN → an execution may exist (a router died before writing its ARN): describe it
  by name and record the ARN; if none exists, *resume*: carry on under the slot if it is held
  (a router died before StartExecution, or is still inside it: the name makes a second start
  harmless), else admit again (a refused start gave the slot back).
- Only unsupported files → COMPLETE without a workflow, conditional on the files read: no slot.

A run that keeps changing under the router (a folder whose files still arrive after its settle
delay: each file refuses the admission conditional on the files read) is not a failure either:
after a few looks its message is re-sent with the capacity wait's short delay and the original
deleted, never left to come back after the queue's visibility timeout.

Who may give a slot back (docs/ARCHITECTURE.md#who-may-give-a-slot-back): only this invocation, only for a slot it took itself
(never one it found held), and only where no execution of that name runs or can still start —
its own StartExecution was refused (or its answer was lost and DescribeExecution finds none) and
no other router has carried on under the slot since (the release is fenced on the run's
`admission` token) — or the execution already ended (a name can never start twice).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, ClassVar

from pipeline.aws import error_code
from pipeline.config import Settings
from pipeline.jobs import (
    ANNOUNCE_LEASE_WAITS,
    MESSAGE_VERSION,
    JobMessage,
    MalformedMessageError,
    format_timestamp,
    parse_timestamp,
    split_supported,
)
from pipeline.status import ExecutionStatus, FailedFileKind, JobStatus, empty_failed_files
from pipeline.stores.protocols import ExecutionsProtocol, SemaphoreProtocol, TrackingProtocol
from pipeline.stores.semaphore import JointWrite, SemaphoreState
from pipeline.stores.tracking import RunRecord

# Looks at the run per message before it is re-sent for later (each look follows a write some
# other writer beat us to, so more than a few means something keeps moving the run).
MAX_LOOKS = 4
# A re-sent message counts its capacity waits under this key: from the second wait on, the router
# asks "still full?" and renews the run's lease in one write before it reads anything.
WAITS_KEY = "capacity_waits"


class RouteOutcome(StrEnum):
    STARTED = "started"
    WAITING = "waiting"  # every slot busy: re-sent with a delay
    RESENT = "resent"  # the run kept changing (a folder still filling): re-sent with a short delay
    DUPLICATE = "duplicate"  # the run already started or ended
    REPAIRED = "repaired"  # its execution existed but no ARN was recorded: recorded now
    NOTHING_TO_PROCESS = "nothing_to_process"  # only unsupported files: completed without a workflow


@dataclass(frozen=True)
class RouteResult:
    outcome: RouteOutcome
    execution_name: str
    execution_arn: str | None = None
    files: int = 0
    unsupported: int = 0
    queued_at: str = ""
    slot_taken: bool = False  # this invocation took a slot and still holds it (not one it adopted)


class RouterError(Exception):
    """A message the router could not route; `reason` is a low-cardinality label for logs."""

    reason: ClassVar[str] = "router_error"


class UnsupportedMessageVersionError(MalformedMessageError):
    """A message in a format this router does not know (`v`): a newer producer, or garbage."""


class UnknownRunError(RouterError, LookupError):
    """The message names a run the tracking table does not hold: retried, then the DLQ."""

    reason = "unknown_run"


class StartExecutionError(RouterError):
    """StartExecution failed and no execution of the name exists (or it could not be told).

    `released` says whether this invocation gave its slot back; `code` is the AWS error code
    (or the exception type) for the log line; `release_error` names a release that failed.
    """

    reason = "start_execution_failed"

    def __init__(self, code: str, *, released: bool, release_error: str = "") -> None:
        kept = f"; giving the slot back failed: {release_error}" if release_error else ""
        super().__init__(f"StartExecution failed: {code}" + ("; slot given back" if released else kept))
        self.code = code
        self.released = released
        self.release_error = release_error


class InconsistentRunError(RouterError):
    """The run moved past IN_PROGRESS (only its execution does that) yet no execution has its name."""

    reason = "inconsistent_run"


def parse_message(body: str) -> JobMessage:
    """The job message in an SQS body; MalformedMessageError for anything else, version included."""
    try:
        message = JobMessage.from_json(body)
    except (ValueError, TypeError) as exc:  # a bad "v" fails int() inside from_json
        if isinstance(exc, MalformedMessageError):
            raise
        raise MalformedMessageError(f"message field has the wrong type: {type(exc).__name__}") from None
    if message.version != MESSAGE_VERSION:
        raise UnsupportedMessageVersionError(f"message version {message.version} (this router reads {MESSAGE_VERSION})")
    return message


# -- decisions (pure) -----------------------------------------------------------------------------


class Step(StrEnum):
    """What the observed run calls for next."""

    UNKNOWN_RUN = "unknown_run"
    DONE = "done"  # nothing to do: ARN recorded, or the run ended with no execution
    ADMIT = "admit"  # QUEUED: take a slot and freeze the run together
    COMPLETE_WITHOUT_WORKFLOW = "complete_without_workflow"  # no supported file: no slot, no execution
    FIND_EXECUTION = "find_execution"  # no ARN, but an execution may exist: describe it by name
    RECORD_ARN = "record_arn"  # the execution exists: write its ARN
    RESUME = "resume"  # IN_PROGRESS and no execution: carry on under the slot, or admit again
    INCONSISTENT = "inconsistent"


class Seen(StrEnum):
    """What DescribeExecution by the run's deterministic name said, if it was asked."""

    NOT_LOOKED = "not_looked"
    EXISTS = "exists"
    NONE = "none"


def next_step(record: RunRecord | None, execution: Seen = Seen.NOT_LOOKED) -> Step:
    """The next step for a run as observed. Pure.

    A QUEUED run has never been admitted, and StartExecution only ever follows an admission, so
    no execution can exist for it. Any later status without an ARN may hide an execution whose
    ARN write was lost (the router died after StartExecution): that is looked up before anything.
    """
    if record is None:
        return Step.UNKNOWN_RUN
    if record.execution_arn:
        return Step.DONE
    has_work = bool(split_supported(record.files)[0])
    if record.status is JobStatus.QUEUED:
        return Step.ADMIT if has_work else Step.COMPLETE_WITHOUT_WORKFLOW
    if execution is Seen.NOT_LOOKED:
        return Step.FIND_EXECUTION
    if execution is Seen.EXISTS:
        return Step.RECORD_ARN
    if record.status.is_terminal:
        return Step.DONE
    if record.status is JobStatus.IN_PROGRESS:
        return Step.RESUME if has_work else Step.COMPLETE_WITHOUT_WORKFLOW
    return Step.INCONSISTENT


class StartFailure(StrEnum):
    ALREADY_EXISTS = "already_exists"  # an execution of the name exists: describe it
    REFUSED = "refused"  # the service answered no: nothing was started by this call
    UNKNOWN = "unknown"  # no answer (timeout, 5xx): it may or may not have started


def waits_of(message: JobMessage) -> int:
    """How many capacity waits the message has been through (0: none, or a sender that does not say)."""
    waits = message.extra.get(WAITS_KEY)
    return waits if isinstance(waits, int) and not isinstance(waits, bool) and waits > 0 else 0


def waited(message: JobMessage) -> JobMessage:
    """The message to re-send after one more capacity wait. Pure."""
    return replace(message, extra={**message.extra, WAITS_KEY: waits_of(message) + 1})


def must_wait(slots: SemaphoreState, holder: str, max_slots: int) -> bool:
    """Every slot is held (by the count or by the holders, as admission bounds both), none by this
    run: its admission would be refused, so it is not tried (a capacity wait costs the read and the
    re-send). Pure. A slot freed after the read makes the message wait once more than it had to; a
    slot taken after it is refused by the admission."""
    return holder not in slots.holders and max(slots.active_count, len(slots.holders)) >= max_slots


def resend_delay(settings: Settings) -> int:
    """How long a message whose run kept changing waits before the router looks again: the
    capacity wait's delay, at least a second (a folder still filling must not spin the router)."""
    return max(1, settings.capacity_retry_seconds)


def announcement_to_extend(deadline: str, now: datetime, retry_seconds: int) -> datetime | None:
    """A capacity wait re-sends the run's message `retry_seconds` ahead; the run's announce
    deadline must cover that delivery, or the reconciler would take the run for unannounced. The
    deadline is extended by several waits at once, and ingest announces a run that far ahead
    already, so a first wait costs no write at all."""
    due = now + timedelta(seconds=retry_seconds)
    if deadline and parse_timestamp(deadline) >= due:
        return None
    return now + timedelta(seconds=retry_seconds * ANNOUNCE_LEASE_WAITS)


def classify_start_failure(exc: BaseException) -> StartFailure:
    """How much a StartExecution error says about whether it started. Pure.

    A 4xx answer (throttled, limit exceeded, invalid input, no such state machine) is a refusal;
    a 5xx, a timeout or a dropped connection says nothing, so DescribeExecution has to.
    """
    code = error_code(exc)
    if code == "ExecutionAlreadyExists":
        return StartFailure.ALREADY_EXISTS
    response = getattr(exc, "response", None)
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode") if isinstance(response, dict) else None
    if code and isinstance(status, int) and 400 <= status < 500:
        return StartFailure.REFUSED
    return StartFailure.UNKNOWN


def execution_input(record: RunRecord, files: list[str], unsupported: list[str], settings: Settings, trace: Mapping[str, str]) -> dict[str, Any]:
    """The workflow's input: everything its tasks need, so no task re-reads the run."""
    return {
        "job_id": record.job_id,
        "started_at": record.started_at,
        "execution_name": record.run.execution_name,
        "bucket": record.bucket or settings.input_bucket,
        "output_bucket": settings.output_bucket,
        "files": files,
        "unsupported": unsupported,
        "redaction_mode": settings.redaction_mode.value,
        "trace": dict(trace),
    }


# -- the router -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Invocation:
    """One route() call: what it routes, and the token that fences its admission."""

    message: JobMessage
    now: datetime
    trace: Mapping[str, str]
    arn: str  # of the execution of the run's name
    token: str

    @property
    def name(self) -> str:
        return self.message.run.execution_name

    @property
    def stamp(self) -> str:
        return format_timestamp(self.now)


class Router:
    def __init__(
        self,
        store: TrackingProtocol,
        semaphore: SemaphoreProtocol,
        executions: ExecutionsProtocol,
        defer: Callable[[JobMessage, int], object],
        settings: Settings,
        new_token: Callable[[], str] = lambda: uuid.uuid4().hex,
    ) -> None:
        self._store = store
        self._semaphore = semaphore
        self._executions = executions
        self._defer = defer
        self._settings = settings
        self._new_token = new_token

    def route(self, message: JobMessage, now: datetime, trace: Mapping[str, str]) -> RouteResult:
        self._settings.require("state_machine_arn")  # before anything is written
        call = _Invocation(message, now, trace, self._executions.arn_of(message.run.execution_name), self._new_token())
        if waits_of(message) and self._still_full(call):
            return self._resend(call)
        for _ in range(MAX_LOOKS):
            # The run and the semaphore in one read: at capacity the message waits on that alone.
            record, slots = self._store.get_run_and_slots(message.run, self._semaphore)
            step = next_step(record)
            if step is Step.FIND_EXECUTION:
                step = next_step(record, Seen.EXISTS if self._executions.status(call.arn) else Seen.NONE)
            if (
                record is not None
                and step in (Step.ADMIT, Step.RESUME)
                and must_wait(slots, call.name, self._settings.max_concurrent_workflows)
            ):
                return self._wait(record, call)
            result = self._act(step, record, call)
            if result is not None:
                return result
        # Every look lost to another writer (ingest still adding files, routers on the same item):
        # look again shortly, from a new message; `record` is the run as last read.
        return self._later(record, call, call.message, resend_delay(self._settings), RouteOutcome.RESENT)

    def _act(self, step: Step, record: RunRecord | None, call: _Invocation) -> RouteResult | None:
        """Carry out one step; None when a conditional write found the run moved: look again."""
        if step is Step.UNKNOWN_RUN or record is None:
            raise UnknownRunError("the message names a run that is not in the tracking table")
        if step is Step.DONE:
            return RouteResult(RouteOutcome.DUPLICATE, call.name, record.execution_arn)
        if step is Step.RECORD_ARN:
            self._store.record_execution(record.run, call.arn, split_supported(record.files)[1])
            return RouteResult(RouteOutcome.REPAIRED, call.name, call.arn)
        if step is Step.COMPLETE_WITHOUT_WORKFLOW:
            return self._complete_without_workflow(record, call)
        if step is Step.ADMIT or step is Step.RESUME:
            return self._admit(record, call)
        raise InconsistentRunError(f"run is {record.status.value} but no execution has its name")

    def _complete_without_workflow(self, record: RunRecord, call: _Invocation) -> RouteResult | None:
        """Only unsupported files: COMPLETE, conditional on the files read (no slot is involved)."""
        unsupported = split_supported(record.files)[1]
        done = self._store.transition(
            record.run,
            JobStatus.COMPLETE,
            call.now,
            fields={"failed_files": empty_failed_files() | {FailedFileKind.UNSUPPORTED: unsupported}},
            expected_status=record.status,
            expected_updated_at=record.updated_at,  # a file that arrived meanwhile makes us look again
        )
        if done is None:
            return None
        self._store.clear_pending(record.run)
        return RouteResult(RouteOutcome.NOTHING_TO_PROCESS, call.name, unsupported=len(unsupported), queued_at=record.queued_at)

    def _admit(self, record: RunRecord, call: _Invocation) -> RouteResult | None:
        """Take the slot and freeze the run together; or carry on under a slot already held."""
        # Conditional on the files read, too: the record read is the run as frozen, no re-read.
        guard = self._store.admission_item(
            record.run, call.now, call.token, expected_status=record.status, expected_files=len(record.files)
        )
        admitted = self._semaphore.admit(call.name, call.stamp, self._settings.max_concurrent_workflows, guard)
        acquired = admitted is JointWrite.DONE
        if admitted is JointWrite.AT_CAPACITY:
            return self._wait(record, call)
        if admitted is JointWrite.ALREADY_HELD:
            # Another invocation took this slot: it died, or it is inside StartExecution. Either
            # way the name makes our start harmless; the new admission token fences its release.
            acquired = False
            if self._semaphore.adopt(call.name, call.stamp, guard) is not JointWrite.DONE:
                return None
        elif not acquired:
            return None  # the run moved (or a transaction conflicted): look again
        if record.status is JobStatus.QUEUED:
            self._store.clear_pending(record.run)
        return self._start(record, call, acquired=acquired)

    def _wait(self, record: RunRecord, call: _Invocation) -> RouteResult:
        """Every slot is busy: re-send the message with a delay (the original is deleted)."""
        retry = self._settings.capacity_retry_seconds
        return self._later(record, call, waited(call.message), retry, RouteOutcome.WAITING)

    def _later(
        self, record: RunRecord | None, call: _Invocation, message: JobMessage, delay: int, outcome: RouteOutcome
    ) -> RouteResult:
        """Re-send `message` `delay` seconds ahead (the original is deleted), the run's announce
        deadline covering that delivery first (the reconciler would otherwise announce it again)."""
        if record is not None:
            extended = announcement_to_extend(record.announce_deadline, call.now, delay)
            if extended is not None:  # before the re-send: a failed write must not leave two copies
                self._store.extend_announcement(record.run, extended)
        self._defer(message, delay)
        return RouteResult(outcome, call.name)

    def _still_full(self, call: _Invocation) -> bool:
        """A message that waited before: while every slot is still held by others, renew the run's
        announcement lease (one conditional write over both items). False: a slot is free, or
        the run moved on: look at it as any message does."""
        lease = call.now + timedelta(seconds=self._settings.capacity_retry_seconds * ANNOUNCE_LEASE_WAITS)
        guard = self._store.lease_item(call.message.run, lease)
        return self._semaphore.while_full(call.name, self._settings.max_concurrent_workflows, guard) is JointWrite.DONE

    def _resend(self, call: _Invocation) -> RouteResult:
        self._defer(waited(call.message), self._settings.capacity_retry_seconds)
        return RouteResult(RouteOutcome.WAITING, call.name)

    def _start(self, record: RunRecord, call: _Invocation, *, acquired: bool) -> RouteResult:
        """StartExecution; the slot is given back only if no execution of the name can exist."""
        files, unsupported = split_supported(record.files)
        payload = json.dumps(execution_input(record, files, unsupported, self._settings, call.trace), ensure_ascii=False)
        outcome, holding = RouteOutcome.STARTED, acquired
        try:
            arn = self._executions.start(call.name, payload)
        except Exception as exc:
            failure = classify_start_failure(exc)
            code = error_code(exc) or type(exc).__name__
            status = None
            if failure is not StartFailure.REFUSED:
                try:
                    status = self._executions.status(call.arn)
                except Exception as described:
                    raise StartExecutionError(code, released=False) from described
            if status is None:
                raise self._start_failed(record, call, code, acquired=acquired) from exc
            arn = call.arn
            if failure is StartFailure.ALREADY_EXISTS:
                outcome = RouteOutcome.DUPLICATE
                if status != ExecutionStatus.RUNNING and acquired:
                    # It ran and ended, and the tracker gave its slot back long ago: the one we
                    # just took belongs to nothing, and the name can never start again.
                    self._semaphore.release(call.name)
                    holding = False
        self._store.record_execution(record.run, arn, unsupported)
        return RouteResult(outcome, call.name, arn, len(files), len(unsupported), record.queued_at, holding)

    def _start_failed(self, record: RunRecord, call: _Invocation, code: str, *, acquired: bool) -> StartExecutionError:
        """No execution of the name exists: give our slot back unless someone carried on under it.

        Only a slot this invocation took, and only while its admission token is still the run's
        latest: a router that adopted the slot since may be inside StartExecution right now. A
        release that itself fails keeps the slot (the safe side: the retried message carries on
        under it) and is named in the error, so it is logged with the failure.
        """
        if not acquired:
            return StartExecutionError(code, released=False)
        fence = self._store.admitted_by_item(record.run, call.token)
        try:
            released = self._semaphore.release_if(call.name, fence) is JointWrite.DONE
        except Exception as exc:
            return StartExecutionError(code, released=False, release_error=error_code(exc) or type(exc).__name__)
        return StartExecutionError(code, released=released)
