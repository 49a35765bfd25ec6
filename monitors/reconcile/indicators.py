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

The findings are pure functions of plain data (`overdue_runs`, `claim_state`); `measure` is the
shell that reads and marks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from monitors.reconcile.model import ActiveRun
from pipeline.deadline import is_overdue, overdue_cutoff
from pipeline.jobs import RunRef
from pipeline.stores.claims import UnsettledClaim
from pipeline.stores.protocols import ClaimsProtocol, TrackingProtocol

# Bounded work a pass: runs marked overdue, unsettled claims read (the rest wait for the next pass).
MAX_OVERDUE_MARKS = 100
MAX_CLAIMS_READ = 500


def overdue_runs(active: Iterable[ActiveRun], now: datetime, deadline: timedelta, limit: int = MAX_OVERDUE_MARKS) -> list[ActiveRun]:
    """Active runs past their deadline whose files were not counted yet, oldest first. Pure."""
    found = [run for run in active if not run.deadline_counted and is_overdue(run.queued_at or run.started_at, now, deadline)]
    return sorted(found, key=lambda run: run.queued_at or run.started_at)[:limit]


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
    lost_files: int = 0  # files claimed past the deadline that no run holds (read-only finding)
    settled: int = 0  # claims settled this pass
    claims_read: int = 0

    def to_dict(self) -> dict[str, int]:
        return {
            "overdue_files": self.overdue_files,
            "overdue_runs": self.overdue_runs,
            "lost_files": self.lost_files,
            "settled": self.settled,
            "claims_read": self.claims_read,
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
    (settling the claims whose file has its outcome, only with `count`)."""
    overdue_files = overdue_count = 0
    if count:
        cutoff = overdue_cutoff(now, deadline)
        for run in overdue_runs(active, now, deadline):
            marked = tracking.count_overdue(RunRef(run.job_id, run.started_at), cutoff)
            if marked is not None:
                overdue_count += 1
                overdue_files += len(marked.files)
    unsettled = claims.unsettled_claims(overdue_cutoff(now, deadline), MAX_CLAIMS_READ)
    holdings = _holdings(tracking, {claim.run for claim in unsettled})
    states = [(claim, claim_state(claim, holdings.get(claim.run))) for claim in unsettled]
    settled = 0
    if count:
        settled = sum(1 for claim, state in states if state is ClaimState.SETTLED and claims.settle(claim))
    lost = sum(1 for _, state in states if state is ClaimState.LOST)
    return Indicators(overdue_files, overdue_count, lost, settled, len(unsettled))


def _holdings(tracking: TrackingProtocol, runs: Iterable[RunRef]) -> Mapping[RunRef, RunHolding]:
    records = tracking.runs_by_ref(sorted(runs, key=lambda run: (run.job_id, run.started_at)))
    return {record.run: RunHolding(frozenset(record.files), record.status.is_terminal) for record in records}
