"""In-memory stand-ins for the stores (tests only).

Each class implements its store's protocol (`pipeline.stores.protocols`: the semaphore, the
executions, the tracking table's runs, its object claims and its indexes), which
`tests/property/test_store_protocols.py` holds them to, with the same conditional semantics as
the DynamoDB / Step Functions calls behind them: every semaphore write bumps `version`, a failed
condition writes nothing, a joint write (admit / adopt / release_if) applies both halves or
neither, and a method that is two calls in the real store (release: first with the count, then
at the floor) is two steps here too. `tests/functional/test_memory_backends_match_moto.py` pins
the semaphore and the admission guards to the real stores on moto.

Every backend calls `hook(label)` right before each operation that is one AWS call in the real
store. A test passes a hook that suspends the calling process there, so another process (a
router, a tracker, a reconciler) can act between any two of its calls: the granularity at which
races happen in the real system.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError, ReadTimeoutError

from pipeline.config import SEMAPHORE_KEY
from pipeline.jobs import RunRef, execution_arn, format_timestamp
from pipeline.status import (
    ACTIVE_STATUSES,
    DeadlineCount,
    ExecutionStatus,
    JobStatus,
    allowed_predecessors,
    empty_failed_files,
)
from pipeline.stores.audit import AuditHistory, AuditRecord, LastRun
from pipeline.stores.claims import ClaimWrite, IngestView, ObjectClaim, UnsettledClaim
from pipeline.stores.executions import ExecutionOutcome, ListedExecution, RunningExecution
from pipeline.stores.semaphore import RELEASE_ROUNDS, AcquireResult, JointWrite, ReleaseResult, SemaphoreState
from pipeline.stores.tracking import RunRecord

Hook = Callable[[str], None]
# (operation, holder, the holder's stamp before the write) after a semaphore write that changed the
# item: "acquire", "admit", "adopt", "release", "release_observed", "release_if", "set_count" (holder
# ""). Not called for `hand_edit`. For the test's invariant checks.
Listener = Callable[[str, str, "str | None"], None]


def no_hook(label: str) -> None:
    """The default hook: run straight through."""


def client_error(code: str, status: int = 400, operation: str = "Call") -> ClientError:
    """A botocore ClientError as AWS answers it (error_code() and the HTTP status both read)."""
    return ClientError({"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, operation)


# -- the semaphore ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryGuard:
    """The run's half of a joint write: a condition and, if both halves hold, a write."""

    check: Callable[[], bool]
    apply: Callable[[], None] = lambda: None





class MemorySemaphore:
    """One semaphore item: `active_count`, `version` (None: attribute absent) and the holders.

    The item's shape is not modelled: the real store's first acquire (no map yet) and its
    migration of holders from before the map are extra calls here left out (same results).
    """

    def __init__(self, hook: Hook = no_hook, listener: Listener | None = None) -> None:
        self.active_count: int | None = None
        self.version: int | None = None
        self.holders: dict[str, str] = {}
        self.hook = hook
        self.listener = listener

    # -- conditions and writes, as the real expressions say them --------------------------------

    def _can_acquire(self, holder: str, max_slots: int) -> bool:
        # attribute_not_exists(#hs.#h) AND size(#hs) < :max
        # AND (attribute_not_exists(active_count) OR active_count < :max)  (no map yet: size 0)
        return (
            holder not in self.holders
            and len(self.holders) < max_slots
            and (self.active_count is None or self.active_count < max_slots)
        )

    def _acquire(self, holder: str, acquired_at: str) -> None:
        # SET #hs.#h = :now ADD active_count :one, version :one
        self.holders[holder] = acquired_at
        self.active_count = (self.active_count or 0) + 1
        self._bump()

    def _can_release(self, holder: str, *, at_floor: bool, seen: str | None = None) -> bool:
        # attribute_exists(#hs.#h) [or #hs.#h = :seen] AND active_count > :zero, or at the floor:
        # ... AND (attribute_not_exists(active_count) OR active_count <= :zero)
        present = holder in self.holders and (seen is None or self.holders[holder] == seen)
        if at_floor:
            return present and (self.active_count is None or self.active_count <= 0)
        return present and self.active_count is not None and self.active_count > 0

    def _ours(self, holder: str, seen: str | None = None) -> bool:
        """What the ALL_OLD item (or a read) says after a failed pair: is the holder still to release?"""
        return holder in self.holders and (seen is None or self.holders[holder] == seen)

    def _release(self, holder: str, *, at_floor: bool) -> None:
        # REMOVE #hs.#h ADD active_count :minus, version :one  |  REMOVE #hs.#h ADD version :one
        del self.holders[holder]
        if not at_floor:
            self.active_count = (self.active_count or 0) - 1
        self._bump()

    def _bump(self) -> None:
        self.version = (self.version or 0) + 1

    def _tell(self, operation: str, holder: str, before: str | None) -> None:
        if self.listener is not None:
            self.listener(operation, holder, before)

    # -- Semaphore's interface ------------------------------------------------------------------

    @property
    def item_ref(self) -> tuple[str, dict[str, Any]]:
        """The real item's (table, key); nothing here reads by it (`get_run_and_slots` takes this object)."""
        return "memory", {"doc_key": {"S": SEMAPHORE_KEY}}

    def migrate(self) -> bool:
        """Holders kept from before the map are not modelled: there is never anything to move."""
        self.hook("semaphore.migrate")
        return False

    def acquire(self, holder: str, acquired_at: str, max_slots: int) -> AcquireResult:
        self.hook(f"semaphore.acquire {holder}")
        if not self._can_acquire(holder, max_slots):
            return AcquireResult.ALREADY_HELD if holder in self.holders else AcquireResult.AT_CAPACITY
        self._acquire(holder, acquired_at)
        self._tell("acquire", holder, None)
        return AcquireResult.ACQUIRED

    def release(self, holder: str) -> ReleaseResult:
        for _ in range(RELEASE_ROUNDS):
            for at_floor in (False, True):
                self.hook(f"semaphore.release {holder}" + (" (floor)" if at_floor else ""))
                if self._can_release(holder, at_floor=at_floor):
                    before = self.holders[holder]
                    self._release(holder, at_floor=at_floor)
                    self._tell("release", holder, before)
                    return ReleaseResult.RELEASED
            if not self._ours(holder):
                return ReleaseResult.NOT_HELD
        return ReleaseResult.NOT_HELD

    def read(self) -> SemaphoreState:
        self.hook("semaphore.read")
        return self.state()

    def release_observed(self, holder: str, acquired_at: str) -> ReleaseResult:
        for _ in range(RELEASE_ROUNDS):
            for at_floor in (False, True):
                self.hook(f"semaphore.release_observed {holder}" + (" (floor)" if at_floor else ""))
                if self._can_release(holder, at_floor=at_floor, seen=acquired_at):
                    self._release(holder, at_floor=at_floor)
                    self._tell("release_observed", holder, acquired_at)
                    return ReleaseResult.RELEASED
            if not self._ours(holder, acquired_at):
                return ReleaseResult.NOT_HELD
        return ReleaseResult.NOT_HELD

    def set_count(self, active_count: int, expected_version: int) -> bool:
        self.hook("semaphore.set_count")
        # "version = :seen", or with 0 seen "attribute_not_exists(version) OR version = :seen"
        if self.version != expected_version and not (expected_version == 0 and self.version is None):
            return False
        self.active_count = active_count
        self._bump()
        self._tell("set_count", "", None)
        return True

    def admit(self, holder: str, acquired_at: str, max_slots: int, guard: MemoryGuard) -> JointWrite:
        self.hook(f"semaphore.admit {holder}")
        sem_ok, guard_ok = self._can_acquire(holder, max_slots), guard.check()
        if not guard_ok:
            return JointWrite.GUARD_REFUSED
        if not sem_ok:
            return JointWrite.ALREADY_HELD if holder in self.holders else JointWrite.AT_CAPACITY
        self._acquire(holder, acquired_at)
        guard.apply()
        self._tell("admit", holder, None)
        return JointWrite.DONE

    def adopt(self, holder: str, adopted_at: str, guard: MemoryGuard) -> JointWrite:
        self.hook(f"semaphore.adopt {holder}")
        sem_ok, guard_ok = holder in self.holders, guard.check()
        if not guard_ok:
            return JointWrite.GUARD_REFUSED
        if not sem_ok:
            return JointWrite.NOT_HELD
        before = self.holders[holder]
        self.holders[holder] = adopted_at  # SET #hs.#h = :now ADD version :one
        self._bump()
        guard.apply()
        self._tell("adopt", holder, before)
        return JointWrite.DONE

    def while_full(self, holder: str, max_slots: int, guard: MemoryGuard) -> JointWrite:
        """The guard's write while every slot is held by others; the semaphore is only checked."""
        self.hook(f"semaphore.while_full {holder}")
        # attribute_not_exists(#hs.#h) AND (active_count >= :max OR size(#hs) >= :max)
        counted_full = self.active_count is not None and self.active_count >= max_slots
        full = holder not in self.holders and (counted_full or len(self.holders) >= max_slots)
        if not guard.check():
            return JointWrite.GUARD_REFUSED
        if not full:
            return JointWrite.SLOT_FREE
        guard.apply()
        return JointWrite.DONE

    def release_if(self, holder: str, guard: MemoryGuard) -> JointWrite:
        for _ in range(RELEASE_ROUNDS):
            for at_floor in (False, True):
                self.hook(f"semaphore.release_if {holder}" + (" (floor)" if at_floor else ""))
                sem_ok, guard_ok = self._can_release(holder, at_floor=at_floor), guard.check()
                if not guard_ok:
                    return JointWrite.GUARD_REFUSED
                if sem_ok:
                    before = self.holders[holder]
                    self._release(holder, at_floor=at_floor)
                    guard.apply()
                    self._tell("release_if", holder, before)
                    return JointWrite.DONE
            self.hook(f"semaphore.read (release_if {holder})")
            if not self._ours(holder):
                return JointWrite.NOT_HELD
        return JointWrite.NOT_HELD

    # -- for tests ------------------------------------------------------------------------------

    def state(self) -> SemaphoreState:
        """What `read()` returns, without the hook."""
        return SemaphoreState(self.active_count or 0, dict(self.holders), self.version or 0)

    def hand_edit(self, active_count: int, *, bump_version: bool) -> None:
        """An operator sets `active_count` in the console (holders untouched)."""
        self.active_count = active_count
        if bump_version:
            self._bump()


# -- executions ------------------------------------------------------------------------------------


@dataclass
class MemoryExecution:
    name: str
    status: ExecutionStatus
    started_at: datetime
    input: str = "{}"
    stopped_at: datetime | None = None
    error: str | None = None
    cause: str | None = None


class StartFault:
    """What the next StartExecution call does instead of simply starting (the test sets it)."""

    REFUSED = "refused"  # a 4xx answer (throttled): nothing started
    TIMEOUT_STARTED = "timeout_started"  # no answer, but the execution started
    TIMEOUT_LOST = "timeout_lost"  # no answer, and nothing started


class MemoryExecutions:
    """Executions of one state machine, by name (a name never starts twice, as in Step Functions).

    The ExecutionsStore interface for the router, the repairs and the reconciler; `next_fault`
    makes the next `start` fail as StartExecution can. No state history is modelled: `history`
    is empty.
    """

    def __init__(
        self,
        state_machine_arn: str,
        clock: Callable[[], datetime],
        hook: Hook = no_hook,
        on_start: Callable[[str], None] | None = None,
    ) -> None:
        self.state_machine_arn = state_machine_arn
        self.executions: dict[str, MemoryExecution] = {}
        self.clock = clock
        self.hook = hook
        self.on_start = on_start
        self.next_fault: str | None = None

    def arn_of(self, name: str) -> str:
        return execution_arn(self.state_machine_arn, name)

    def start(self, name: str, input: str) -> str:
        """StartExecution: the fault set for it, else started (ExecutionAlreadyExists for a used name)."""
        self.hook(f"sfn.start_execution {name}")
        fault, self.next_fault = self.next_fault, None
        if fault == StartFault.REFUSED:
            raise client_error("ThrottlingException", 400, "StartExecution")
        if fault == StartFault.TIMEOUT_LOST:
            raise ReadTimeoutError(endpoint_url="https://states.example")
        self.begin(name, input)
        if fault == StartFault.TIMEOUT_STARTED:
            raise ReadTimeoutError(endpoint_url="https://states.example")
        return self.arn_of(name)

    def status(self, arn: str) -> ExecutionStatus | None:
        return self.describe(arn.rsplit(":", 1)[-1]).status

    def running(self) -> Iterator[RunningExecution]:
        self.hook("executions.running")
        listed = [
            RunningExecution(e.name, self.arn_of(e.name), e.started_at)
            for e in self.executions.values()
            if e.status is ExecutionStatus.RUNNING
        ]
        return iter(listed)

    def listed(self) -> Iterator[ListedExecution]:
        self.hook("executions.listed")
        newest_first = sorted(self.executions.values(), key=lambda e: e.started_at, reverse=True)
        return iter([ListedExecution(e.name, self.arn_of(e.name), e.status, e.started_at) for e in newest_first])

    def history(self, arn: str) -> Iterator[Mapping[str, Any]]:
        self.hook(f"executions.history {arn.rsplit(':', 1)[-1]}")
        return iter(())

    def describe(self, name: str) -> ExecutionOutcome:
        self.hook(f"executions.describe {name}")
        execution = self.executions.get(name)
        if execution is None:
            return ExecutionOutcome(name, self.arn_of(name), None)
        return ExecutionOutcome(
            name=name,
            arn=self.arn_of(name),
            status=execution.status,
            error=execution.error,
            cause=execution.cause,
            started_at=execution.started_at,
            stopped_at=execution.stopped_at,
        )

    def stop(self, arn: str, error: str, cause: str) -> None:
        name = arn.rsplit(":", 1)[-1]
        self.hook(f"executions.stop {name}")
        execution = self.executions.get(name)
        if execution is None:
            raise client_error("ExecutionDoesNotExist", operation="StopExecution")
        if execution.status is ExecutionStatus.RUNNING:
            self.end(name, ExecutionStatus.ABORTED, error=error, cause=cause)

    # -- the world's side -----------------------------------------------------------------------

    def begin(self, name: str, input: str = "{}") -> MemoryExecution:
        """An execution starts (ExecutionAlreadyExists for a name used before)."""
        if name in self.executions:
            raise client_error("ExecutionAlreadyExists", operation="StartExecution")
        execution = MemoryExecution(name, ExecutionStatus.RUNNING, self.clock(), input)
        self.executions[name] = execution
        if self.on_start is not None:
            self.on_start(name)
        return execution

    def end(self, name: str, status: ExecutionStatus, *, error: str | None = None, cause: str | None = None) -> None:
        execution = self.executions[name]
        execution.status, execution.stopped_at = status, self.clock()
        execution.error, execution.cause = error, cause


# -- runs ------------------------------------------------------------------------------------------


@dataclass
class _Run:
    job_id: str
    started_at: str
    status: JobStatus
    updated_at: str
    files: tuple[str, ...]
    bucket: str
    queued_at: str
    execution_arn: str | None = None
    admission: str | None = None
    announce_deadline: str = ""
    announcements: int = 0
    deadline_counted: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def record(self) -> RunRecord:
        failed = {**empty_failed_files(), **(self.extra.get("failed_files") or {})}
        return RunRecord(
            job_id=self.job_id,
            started_at=self.started_at,
            status=self.status,
            updated_at=self.updated_at,
            files=self.files,
            bucket=self.bucket,
            queued_at=self.queued_at,
            execution_arn=self.execution_arn,
            execution_name=RunRef(self.job_id, self.started_at).execution_name,
            failed_files=failed,
            error=self.extra.get("error"),
            cause=self.extra.get("cause"),
            announce_deadline=self.announce_deadline,
            announcements=self.announcements,
            deadline_counted=self.deadline_counted,
        )


@dataclass
class _Head:
    """A job's head item: its latest run's start, and the run that still accepts files."""

    latest: str = ""
    pending: str = ""


class MemoryTrackingStore:
    """Run items of the tracking table, with the real store's conditions (forward-only status)."""

    def __init__(self, hook: Hook = no_hook, on_transition: Callable[[RunRef, JobStatus], None] | None = None) -> None:
        self.runs: dict[RunRef, _Run] = {}
        self.heads: dict[str, _Head] = {}
        # (bucket, key) -> the object's claim: a run made by `create_run` here stands for ingest's
        # run written together with its files' claims (the real one, used by batch mode, writes none).
        self.claims: dict[tuple[str, str], ObjectClaim] = {}
        self.hook = hook
        self.on_transition = on_transition

    def create_run(
        self,
        run: RunRef,
        files: Sequence[str],
        bucket: str,
        now: datetime,
        extra: Mapping[str, Any] | None = None,
        *,
        lead: bool = True,
        announce_delay: int = 0,
    ) -> bool:
        self.hook(f"tracking.create_run {run.job_id}")
        if run in self.runs:
            return False
        stamp = format_timestamp(now)
        deadline = format_timestamp(now + timedelta(seconds=announce_delay))
        self.runs[run] = _Run(
            run.job_id, run.started_at, JobStatus.QUEUED, stamp, tuple(sorted(set(files))), bucket, stamp, announce_deadline=deadline
        )
        self.claims.update({(bucket, key): ObjectClaim(bucket, key, run) for key in files})
        if lead:
            self.advance_head(run, now)
        return True

    def advance_head(self, run: RunRef, now: datetime) -> None:
        self.hook(f"tracking.advance_head {run.job_id}")
        head = self.heads.setdefault(run.job_id, _Head())
        if not head.latest or head.latest < run.started_at:  # a newer run already leads: nothing to do
            head.latest = run.started_at

    def runs_of(self, job_id: str, limit: int = 20) -> list[RunRecord]:
        self.hook(f"tracking.runs_of {job_id}")
        runs = (r for ref, r in self.runs.items() if ref.job_id == job_id)
        newest_first = sorted(runs, key=lambda r: r.started_at, reverse=True)
        return [r.record() for r in newest_first[:limit]]

    def latest_runs(self, job_ids: Sequence[str]) -> dict[str, RunRecord]:
        self.hook("tracking.latest_runs")
        heads = {job_id: self.heads.get(job_id, _Head()).latest for job_id in job_ids}
        latest = {job_id: RunRef(job_id, started_at) for job_id, started_at in heads.items() if started_at}
        return {job_id: self.runs[run].record() for job_id, run in latest.items() if run in self.runs}

    def runs_by_ref(self, runs: Sequence[RunRef]) -> list[RunRecord]:
        self.hook("tracking.runs_by_ref")
        return [self.runs[run].record() for run in dict.fromkeys(runs) if run in self.runs]

    def pending_run(self, job_id: str) -> RunRef | None:
        self.hook(f"tracking.pending_run {job_id}")
        pending = self.heads.get(job_id, _Head()).pending
        return RunRef(job_id, pending) if pending else None

    def extend_announcement(self, run: RunRef, deadline: datetime) -> bool:
        self.hook(f"tracking.extend_announcement {run.job_id}")
        found = self.runs.get(run)
        if found is None or found.execution_arn or found.status not in (JobStatus.QUEUED, JobStatus.IN_PROGRESS):
            return False
        found.announce_deadline = format_timestamp(deadline)
        return True

    def lease_item(self, run: RunRef, deadline: datetime) -> MemoryGuard:
        """`extend_announcement` as the guard of a joint write (no hook: the joint write has it)."""

        def check() -> bool:
            found = self.runs.get(run)
            return found is not None and not found.execution_arn and found.status in (JobStatus.QUEUED, JobStatus.IN_PROGRESS)

        def apply() -> None:
            self.runs[run].announce_deadline = format_timestamp(deadline)

        return MemoryGuard(check, apply)

    def record_reannouncement(
        self, run: RunRef, now: datetime, *, expected_status: JobStatus, expected_deadline: str
    ) -> bool:
        self.hook(f"tracking.record_reannouncement {run.job_id}")
        found = self.runs.get(run)
        if found is None or found.status is not expected_status or found.execution_arn:
            return False
        if found.announce_deadline != expected_deadline:
            return False
        found.announce_deadline, found.announcements = format_timestamp(now), found.announcements + 1
        return True

    def delete_unclaimed_run(self, run: RunRef, *, expected_updated_at: str) -> bool:
        self.hook(f"tracking.delete_unclaimed_run {run.job_id}")
        found = self.runs.get(run)
        if found is None or found.status is not JobStatus.QUEUED or found.updated_at != expected_updated_at or found.execution_arn:
            return False
        del self.runs[run]
        self.clear_pending(run)
        return True

    def get_run(self, run: RunRef) -> RunRecord | None:
        self.hook(f"tracking.get_run {run.job_id}")
        found = self.runs.get(run)
        return found.record() if found else None

    def get_run_and_slots(self, run: RunRef, semaphore: MemorySemaphore) -> tuple[RunRecord | None, SemaphoreState]:
        """One call in the real store (a BatchGetItem over both tables): one step here."""
        self.hook(f"tracking.get_run_and_slots {run.job_id}")
        found = self.runs.get(run)
        return (found.record() if found else None), semaphore.state()

    def transition(
        self,
        run: RunRef,
        target: JobStatus,
        now: datetime,
        *,
        fields: Mapping[str, Any] | None = None,
        expected_status: JobStatus | None = None,
        expected_updated_at: str | None = None,
        count_deadline: bool = False,
    ) -> RunRecord | None:
        self.hook(f"tracking.transition {run.job_id} -> {target.value}")
        found = self.runs.get(run)
        allowed = [expected_status] if expected_status else list(allowed_predecessors(target))
        if found is None or found.status not in allowed:
            return None
        if expected_updated_at is not None and found.updated_at != expected_updated_at:
            return None
        found.status, found.updated_at = target, format_timestamp(now)
        found.extra.update(fields or {})
        if count_deadline and target.is_terminal and not found.deadline_counted:
            found.deadline_counted = DeadlineCount.ENDED.value
        if self.on_transition is not None:
            self.on_transition(run, target)
        return found.record()

    def count_ended(self, run: RunRef) -> RunRecord | None:
        self.hook(f"tracking.count_ended {run.job_id}")
        found = self.runs.get(run)
        if found is None or found.deadline_counted or not found.status.is_terminal:
            return None
        found.deadline_counted = DeadlineCount.ENDED.value
        return found.record()

    def count_overdue(self, run: RunRef, queued_before: str) -> RunRecord | None:
        self.hook(f"tracking.count_overdue {run.job_id}")
        found = self.runs.get(run)
        if found is None or found.deadline_counted or found.status.is_terminal or not found.queued_at < queued_before:
            return None
        found.deadline_counted = DeadlineCount.OVERDUE.value
        return found.record()

    def record_execution(self, run: RunRef, execution_arn: str, unsupported: Sequence[str]) -> None:
        self.hook(f"tracking.record_execution {run.job_id}")
        found = self.runs.get(run)
        if found is None:  # ConditionExpression attribute_exists(job_id)
            raise client_error("ConditionalCheckFailedException", 400, "UpdateItem")
        found.execution_arn = execution_arn  # updated_at untouched, as in the real store

    def clear_pending(self, run: RunRef) -> None:
        self.hook(f"tracking.clear_pending {run.job_id}")
        head = self.heads.get(run.job_id)
        if head is not None and head.pending == run.started_at:  # else it moved on already
            head.pending = ""

    def admission_item(
        self, run: RunRef, now: datetime, token: str, *, expected_status: JobStatus, expected_files: int | None = None
    ) -> MemoryGuard:
        def check() -> bool:
            found = self.runs.get(run)
            return (
                found is not None
                and found.status is expected_status
                and found.execution_arn is None
                and (expected_files is None or len(found.files) == expected_files)
            )

        def apply() -> None:
            found = self.runs[run]
            found.status, found.updated_at, found.admission = JobStatus.IN_PROGRESS, format_timestamp(now), token

        return MemoryGuard(check, apply)

    def admitted_by_item(self, run: RunRef, token: str) -> MemoryGuard:
        def check() -> bool:
            found = self.runs.get(run)
            return found is not None and found.admission == token and found.execution_arn is None

        return MemoryGuard(check)


# -- object claims ---------------------------------------------------------------------------------


class MemoryClaims:
    """Object claims over a MemoryTrackingStore's runs and heads: ingest's two transactions write
    the run, the job's head and the claim together or not at all, as the real store's do."""

    def __init__(self, tracking: MemoryTrackingStore, hook: Hook = no_hook) -> None:
        self.tracking = tracking
        self.hook = hook
        self.settled: set[tuple[str, str, int]] = set()  # (bucket, key, revision) out of the index

    def unsettled_claims(self, claimed_before: str, limit: int) -> list[UnsettledClaim]:
        """A claim counts as written when its run was queued (the stand-in keeps no claim time)."""
        self.hook("claims.unsettled_claims")
        found = []
        for (bucket, key), claim in self.tracking.claims.items():
            run = self.tracking.runs.get(claim.run)
            claimed_at = run.queued_at if run else ""
            if (bucket, key, claim.revision) not in self.settled and claimed_at < claimed_before:
                found.append(UnsettledClaim(bucket, key, claim.run, claim.revision, claimed_at))
        return sorted(found, key=lambda claim: claim.claimed_at)[:limit]

    def settle(self, claim: UnsettledClaim) -> bool:
        self.hook(f"claims.settle {claim.key}")
        current = self.tracking.claims.get((claim.bucket, claim.key))
        marker = (claim.bucket, claim.key, claim.revision)
        if current is None or current.revision != claim.revision or marker in self.settled:
            return False
        self.settled.add(marker)
        return True

    def claimed_runs(self, bucket: str, keys: Iterable[str]) -> dict[str, RunRef]:
        self.hook("claims.claimed_runs")
        claims = self.tracking.claims
        return {key: claims[(bucket, key)].run for key in keys if (bucket, key) in claims}

    def object_claim(self, bucket: str, key: str) -> ObjectClaim | None:
        self.hook(f"claims.object_claim {key}")
        return self.tracking.claims.get((bucket, key))

    def ingest_view(self, bucket: str, key: str, job_id: str) -> IngestView:
        self.hook(f"claims.ingest_view {key}")
        head = self.tracking.heads.get(job_id, _Head())
        pending = RunRef(job_id, head.pending) if head.pending else None
        return IngestView(self.tracking.claims.get((bucket, key)), pending, head.latest)

    def open_run_with_claim(self, claim: ObjectClaim, bucket: str, now: datetime, announce_delay: int = 0) -> ClaimWrite:
        self.hook(f"claims.open_run_with_claim {claim.key}")
        run, head = claim.run, self.tracking.heads.get(claim.run.job_id, _Head())
        if not self._claim_holds(claim):
            return ClaimWrite.CLAIM_MOVED
        if head.pending or (head.latest and head.latest >= run.started_at):
            return ClaimWrite.PENDING_MOVED
        if run in self.tracking.runs:
            return ClaimWrite.RUN_EXISTS
        stamp = format_timestamp(now)
        deadline = format_timestamp(now + timedelta(seconds=announce_delay))
        self.tracking.runs[run] = _Run(
            run.job_id, run.started_at, JobStatus.QUEUED, stamp, (claim.key,), bucket, stamp, announce_deadline=deadline
        )
        self.tracking.heads[run.job_id] = _Head(latest=run.started_at, pending=run.started_at)
        self.tracking.claims[(claim.bucket, claim.key)] = claim
        return ClaimWrite.WRITTEN

    def join_run_with_claim(self, claim: ObjectClaim, now: datetime, max_files: int | None = None) -> ClaimWrite:
        self.hook(f"claims.join_run_with_claim {claim.key}")
        found = self.tracking.runs.get(claim.run)
        if not self._claim_holds(claim):
            return ClaimWrite.CLAIM_MOVED
        room = max_files is None or claim.key in found.files or len(found.files) < max_files if found else False
        if found is None or found.status is not JobStatus.QUEUED or not room:
            return ClaimWrite.RUN_CLOSED
        found.files, found.updated_at = tuple(sorted({*found.files, claim.key})), format_timestamp(now)
        self.tracking.claims[(claim.bucket, claim.key)] = claim
        return ClaimWrite.WRITTEN

    def _claim_holds(self, claim: ObjectClaim) -> bool:
        """The claim's condition: none yet for a first claim, else the revision it replaces."""
        current = self.tracking.claims.get((claim.bucket, claim.key))
        return current is None if claim.revision <= 1 else current is not None and current.revision == claim.revision - 1


# -- the tracking table's indexes ------------------------------------------------------------------


class MemoryRunIndex:
    """The index reads over a MemoryTrackingStore's runs (active: not terminal; newest first by updated_at)."""

    def __init__(self, tracking: MemoryTrackingStore, hook: Hook = no_hook) -> None:
        self.tracking = tracking
        self.hook = hook

    def active_runs(self, status: JobStatus | None = None, updated_before: str | None = None) -> Iterator[RunRecord]:
        self.hook("runs.active_runs")
        statuses = [status] if status else list(ACTIVE_STATUSES)
        found = [
            r.record()
            for wanted in statuses
            for r in self.tracking.runs.values()
            if r.status is wanted and (updated_before is None or r.updated_at < updated_before)
        ]
        return iter(found)

    def count_active(self) -> dict[JobStatus, int]:
        self.hook("runs.count_active")
        return {status: sum(1 for r in self.tracking.runs.values() if r.status is status) for status in ACTIVE_STATUSES}

    def newest(self, status: JobStatus, limit: int) -> list[RunRecord]:
        self.hook(f"runs.newest {status.value}")
        return [r.record() for r in self._newest_first(status)[:limit]]

    def ended_since(self, status: JobStatus, since: str, cap: int) -> tuple[list[str], bool]:
        self.hook(f"runs.ended_since {status.value}")
        stamps = [r.updated_at for r in self._newest_first(status) if r.updated_at > since]
        return stamps[:cap], len(stamps) >= cap  # DynamoDB says there may be more once the limit is read

    def last_ended_after(self, after: str) -> str | None:
        self.hook("runs.last_ended_after")
        ended = [r.updated_at for r in self.tracking.runs.values() if r.status in (JobStatus.COMPLETE, JobStatus.FAILED)]
        return max((stamp for stamp in ended if stamp > after), default=None)

    def _newest_first(self, status: JobStatus) -> list[_Run]:
        return sorted((r for r in self.tracking.runs.values() if r.status is status), key=lambda r: r.updated_at, reverse=True)


# -- the audit trail -------------------------------------------------------------------------------


class MemoryAudit:
    """Audit records and the last-run summary, kept in lists (the real store puts one item each)."""

    def __init__(self, hook: Hook = no_hook) -> None:
        self.records: list[AuditRecord] = []
        self.last: LastRun | None = None
        self.hook = hook

    def record(
        self, *, action: str, target: str, reason: str, before: Mapping[str, Any], after: Mapping[str, Any], by: str, at: datetime
    ) -> None:
        self.hook(f"audit.record {action} {target}")
        # As written and read back: JSON objects, so their values are what JSON keeps.
        plain = json.loads(json.dumps({"before": dict(before), "after": dict(after)}, sort_keys=True))
        self.records.append(AuditRecord(format_timestamp(at), action, target, reason, by, plain["before"], plain["after"]))

    def record_last_run(self, run: LastRun) -> None:
        self.hook("audit.record_last_run")
        self.last = run

    def last_run(self) -> LastRun | None:
        self.hook("audit.last_run")
        return self.last

    def history(self, since: datetime, limit: int = 50, *, scan_without_index: bool = True) -> AuditHistory:
        self.hook("audit.history")
        if limit <= 0:
            return AuditHistory([], "query", False)
        found = sorted((r for r in self.records if r.at > format_timestamp(since)), key=lambda r: r.at, reverse=True)
        return AuditHistory(found[:limit], "query", len(found) > limit, min(len(found), limit + 1))
