"""What the reconciler sees, finds and does, as plain data (docs/ARCHITECTURE.md#reconciler).

The observation carries identities, not counts: which holder, since when; which execution, since
when; which run, in which status. `plan(observation)` is a pure function of it; every action
carries the values it was planned from, so the executor's write is conditional on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from pipeline.config import ReconcileSettings
from pipeline.status import ExecutionStatus, JobStatus
from pipeline.stores.executions import ExecutionOutcome, RunningExecution


@dataclass(frozen=True)
class Holder:
    """One slot of the semaphore: the execution name it was taken for, and when (re-stamped on adopt)."""

    name: str
    acquired_at: str  # as stored: the release is conditional on this exact value

    @property
    def since(self) -> datetime:
        return datetime.fromisoformat(self.acquired_at.replace("Z", "+00:00"))


@dataclass(frozen=True)
class ActiveRun:
    """A run in an active status, read from the sparse active index."""

    job_id: str
    started_at: str
    status: JobStatus
    updated_at: str
    execution_name: str
    execution_arn: str | None = None
    bucket: str = ""
    files: tuple[str, ...] = ()
    announce_deadline: str = ""  # a message for it may be on its way to a router until then
    announcements: int = 0  # times the reconciler announced it again
    queued_at: str = ""  # where its files' deadline counts from (pipeline/deadline.py)
    deadline_counted: str = ""  # its files were counted for the on-time objective ("": not yet)

    @property
    def last_change(self) -> datetime:
        return _parse(self.updated_at)

    @property
    def announced_until(self) -> datetime:
        """The later of its last change and its announce deadline (records written before the
        deadline existed count from their last change)."""
        if not self.announce_deadline:
            return self.last_change
        return max(self.last_change, _parse(self.announce_deadline))

    @property
    def target(self) -> str:
        return f"{self.job_id}@{self.started_at}"


def _parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


@dataclass(frozen=True)
class Observation:
    taken_at: datetime
    semaphore_read_at: datetime  # before the executions were listed: the order makes orphans honest
    active_count: int
    version: int
    holders: tuple[Holder, ...]
    running: tuple[RunningExecution, ...]
    # For every holder and active run whose execution was not listed RUNNING: what DescribeExecution
    # said afterwards (status None: no such execution; RUNNING: it started after the listing).
    described: Mapping[str, ExecutionOutcome]
    active_runs: tuple[ActiveRun, ...]
    settings: ReconcileSettings
    # For each overdue QUEUED run of realtime ingest (by target): how many of its files' object
    # claims name it. 0: a candidate that lost the claim race; absent: not looked at.
    claimed_files: Mapping[str, int] = field(default_factory=dict)
    # When a run last ended, if the oldest QUEUED run is older than the stall window (else None:
    # not looked up, as nothing can be stalled).
    last_run_ended: datetime | None = None

    @property
    def drift(self) -> int:
        """CounterDrift: the count minus the router-started executions running now, less the slots
        in transit (`in_transit`): a healthy pipeline at full throughput always has some."""
        listed = {execution.name for execution in self.running}
        held_running = sum(1 for holder in self.holders if holder.name in listed)
        in_transit = sum(1 for holder in self.holders if holder.name not in listed and self.in_transit(holder))
        return counter_drift(self.active_count, held_running, in_transit)

    def in_transit(self, holder: Holder, grace: float | None = None) -> bool:
        """A holder not listed RUNNING that the reconciler leaves to its router or tracker this pass:
        its execution was described RUNNING (started after the listing), ended within the grace
        (its status event is on the way to the tracker), or does not exist yet and the holder is
        within the grace (a router between admission and StartExecution). A holder not described
        is not in transit: nothing vouches for it."""
        outcome = self.described.get(holder.name)
        if outcome is None:
            return False
        grace = self.settings.grace_seconds if grace is None else grace
        if outcome.status is ExecutionStatus.RUNNING:
            return True
        if outcome.exists:
            return ended_within(outcome, self.semaphore_read_at, grace)
        return age_seconds(self.semaphore_read_at, holder.since) <= grace


def counter_drift(active_count: int, held_running: int, in_transit: int) -> int:
    """The count above the holders' running executions, less the slots in transit; a count below
    them is reported as is (no race makes it: CounterBelowRunning). With no holder in transit
    (a count at the max with no holder at all) every slot above the running ones is drift."""
    low = active_count - held_running
    return low if low <= 0 else max(0, low - in_transit)


def ended_within(outcome: ExecutionOutcome, now: datetime, grace: float) -> bool:
    """The tracker is the first to act on an ended execution; the reconciler is its backstop and
    does not race it: an execution that ended within the grace is left to its status event."""
    return outcome.stopped_at is not None and age_seconds(now, outcome.stopped_at) <= grace


def age_seconds(now: datetime, since: datetime) -> float:
    return (now - since).total_seconds()


class FindingKind(StrEnum):
    LEAKED_SLOT = "leaked_slot"
    SLOT_WITHOUT_EXECUTION = "slot_without_execution"
    ORPHAN_EXECUTION = "orphan_execution"
    COUNT_MISMATCH = "count_mismatch"
    STUCK_RUN = "stuck_run"
    UNANNOUNCED_RUN = "unannounced_run"
    IMPLAUSIBLE_DRIFT = "implausible_drift"
    REPAIRS_CAPPED = "repairs_capped"
    OVERRIDE_REFUSED = "override_refused"  # `--release NAME` named a holder it may not release


class ActionKind(StrEnum):
    RELEASE_HOLDER = "release_holder"  # conditional on the observed acquire time
    SET_COUNT = "set_count"  # conditional on the observed version
    MARK_RUN_FAILED = "mark_run_failed"  # conditional on the observed status and updated_at
    REANNOUNCE_RUN = "reannounce_run"  # the deterministic name makes a second message harmless
    DELETE_UNCLAIMED_RUN = "delete_unclaimed_run"  # conditional on the observed status and updated_at


@dataclass(frozen=True)
class Finding:
    kind: FindingKind
    target: str  # the execution name or run it concerns ("semaphore" for the count)
    reason: str


@dataclass(frozen=True)
class Action:
    kind: ActionKind
    target: str
    reason: str
    # What the write is conditional on, and what it writes (plain values, for the audit record too).
    expected: Mapping[str, Any] = field(default_factory=dict)
    values: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    findings: tuple[Finding, ...]
    actions: tuple[Action, ...]

    @property
    def clean(self) -> bool:
        return not self.findings
