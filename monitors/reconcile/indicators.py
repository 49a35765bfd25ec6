"""The on-time objective's two indicators only the reconciler can see: overdue and lost files.

A file that never reaches a terminal outcome is never counted where outcomes are written (the
tracker), so the reconciler counts it on its schedule (pipeline/deadline.py has the rules):

- overdue: an active run queued longer than `FileDeadlineMinutes` ago and not counted yet. Its
  files are counted bad once ever, by a conditional mark on the run (`count_overdue`), never in a
  report-only pass (which marks nothing, so it emits no FilesOverdue either: a later applying
  pass counts them). The active runs come from the observation the plan was made from: no read
  of its own.
- lost: a file ingest claimed longer than the deadline ago that the run its claim names does not
  hold (removed from it, or the run is gone): no outcome can ever come for it. Only the claims
  not yet settled are read, from the sparse `unsettled-claims` index, oldest first and at most
  `MAX_CLAIMS_READ` a pass; a claim whose run ended holding its file is settled (the attribute
  that keys the index is removed, conditional on the claim's revision), so a pass costs the files
  in flight past the deadline and the lost ones, never the table. A lost file's claim stays
  unsettled until the file is uploaded again (a new claim, younger than the deadline).

With ReconcileApply=false nothing is settled either (a report-only pass writes nothing): the
oldest `MAX_CLAIMS_READ` claims past the deadline are read every pass, and lost files beyond
them go unseen until an applying pass settles the rest.

The findings are pure functions of plain data (`overdue_runs`, `claim_state`); `measure` is the
shell that reads and marks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from monitors.reconcile.model import ActiveRun
from pipeline.aws import error_code
from pipeline.deadline import is_overdue, overdue_cutoff
from pipeline.jobs import RunRef
from pipeline.stores.claims import UnsettledClaim
from pipeline.stores.protocols import ClaimsProtocol, TrackingProtocol

# Bounded work a pass: runs marked overdue, unsettled claims read (the rest wait for the next pass).
MAX_OVERDUE_MARKS = 100
MAX_CLAIMS_READ = 500


def overdue_runs(active: Iterable[ActiveRun], now: datetime, deadline: timedelta, limit: int = MAX_OVERDUE_MARKS) -> list[ActiveRun]:
    """Active runs past their deadline whose files were not counted yet, oldest first. Pure."""
    found = [run for run in active if not run.deadline_counted and is_overdue(run.queued_at, now, deadline)]
    return sorted(found, key=lambda run: run.queued_at)[:limit]


@dataclass(frozen=True)
class RunHolding:
    """What a claim's run says of its files: which it holds, and whether it has ended."""

    files: frozenset[str]
    ended: bool


class ClaimState(StrEnum):
    SETTLED = "settled"  # its run ended holding it: the file has its outcome
    IN_FLIGHT = "in_flight"  # its run holds it and is still active (overdue, maybe; not lost)
    LOST = "lost"  # its run is gone or does not hold it: no outcome can come


def claim_state(claim: UnsettledClaim, run: RunHolding | None) -> ClaimState:
    """Where a claimed file stands, from the run its claim names (None: no such run). Pure."""
    if run is None or claim.key not in run.files:
        return ClaimState.LOST
    return ClaimState.SETTLED if run.ended else ClaimState.IN_FLIGHT


@dataclass(frozen=True)
class Indicators:
    """What one pass found for the objective, and what it marked."""

    overdue_files: int = 0  # files of the runs this pass counted overdue (0 when not counting)
    overdue_runs: int = 0
    lost_files: int | None = 0  # files claimed past the deadline that no run holds; None: not read
    settled: int = 0  # claims settled this pass
    claims_read: int = 0
    # What failed (the AWS error code or exception type, never an item): the overdue marks stop
    # there, the ones made are still counted; lost files are not reported this pass.
    errors: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "overdue_files": self.overdue_files,
            "overdue_runs": self.overdue_runs,
            "lost_files": self.lost_files,
            "settled": self.settled,
            "claims_read": self.claims_read,
            "errors": list(self.errors),
        }


def measure(
    active: Sequence[ActiveRun],
    tracking: TrackingProtocol,
    claims: ClaimsProtocol,
    now: datetime,
    deadline: timedelta,
    *,
    count: bool,
) -> Indicators:
    """Count overdue runs (only with `count`: a conditional mark each) and find lost files
    (settling the claims whose file has its outcome, only with `count`). A failure ends its part
    and is reported, never raised: a mark already made must still be emitted (it is never made
    again), and the reconciler's heartbeat must not depend on an index (one being built after a
    stack update cannot be queried yet)."""
    errors: list[str] = []
    overdue_files = overdue_count = 0
    if count:
        cutoff = overdue_cutoff(now, deadline)
        try:
            for run in overdue_runs(active, now, deadline):
                marked = tracking.count_overdue(RunRef(run.job_id, run.started_at), cutoff)
                if marked is not None:
                    overdue_count += 1
                    overdue_files += len(marked.files)
        except Exception as exc:
            errors.append(f"overdue: {error_code(exc) or type(exc).__name__}")
    try:
        lost, settled, read = _lost(tracking, claims, now, deadline, settle=count)
    except Exception as exc:
        errors.append(f"lost: {error_code(exc) or type(exc).__name__}")
        return Indicators(overdue_files, overdue_count, None, 0, 0, tuple(errors))
    return Indicators(overdue_files, overdue_count, lost, settled, read, tuple(errors))


def _lost(
    tracking: TrackingProtocol, claims: ClaimsProtocol, now: datetime, deadline: timedelta, *, settle: bool
) -> tuple[int, int, int]:
    """(lost files, claims settled, claims read) from the oldest unsettled claims past the deadline."""
    unsettled = claims.unsettled_claims(overdue_cutoff(now, deadline), MAX_CLAIMS_READ)
    holdings = _holdings(tracking, {claim.run for claim in unsettled})
    states = [(claim, claim_state(claim, holdings.get(claim.run))) for claim in unsettled]
    settled = 0
    if settle:
        settled = sum(1 for claim, state in states if state is ClaimState.SETTLED and claims.settle(claim))
    return sum(1 for _, state in states if state is ClaimState.LOST), settled, len(unsettled)


def _holdings(tracking: TrackingProtocol, runs: Iterable[RunRef]) -> Mapping[RunRef, RunHolding]:
    records = tracking.runs_by_ref(sorted(runs, key=lambda run: (run.job_id, run.started_at)))
    return {record.run: RunHolding(frozenset(record.files), record.status.is_terminal) for record in records}
