"""The "files done on time" indicators: on time, late, overdue; each file counted once
(docs/ARCHITECTURE.md#on-time-indicators).

A file's clock starts when its run was queued (`queued_at`): ingest writes it in the transaction
that accepts the run's first file, the earliest moment the pipeline knows of any of its files (a
file that joined the run later is measured from the same start, so no file looks on time that
was not; S3's event time is not kept). It stops at the run's terminal outcome, COMPLETE or
FAILED (the status enum's terminal set; unsupported and empty files end with their run): the run
record's `updated_at`, which a terminal record never changes again.

Every run is counted once ever, by a conditional write of `deadline_counted` on its record:
whoever wins says what its files were. At its end, by the write that ends it where it can (the
workflow's verdict, `TrackingStore.transition(count_deadline=True)`: no call of its own on the
healthy path), else by the tracker on a failed execution's end (`count_ended`); overdue, by the
reconciler (`count_overdue`). A run counted overdue that ends later counts nothing more; a run
counted at its end is never counted overdue. A repeated status event, a retried task, or two
reconcilers racing count it once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from pipeline.jobs import RunRef, format_timestamp, parse_timestamp
from pipeline.status import DeadlineCount
from pipeline.stores.protocols import TrackingProtocol
from pipeline.stores.tracking import RunRecord


class Verdict(StrEnum):
    ON_TIME = "on_time"
    LATE = "late"


def verdict(queued_at: datetime, ended_at: datetime, deadline: timedelta) -> Verdict:
    """On time when the run ended within `deadline` of being queued (the deadline itself included). Pure."""
    return Verdict.ON_TIME if ended_at - queued_at <= deadline else Verdict.LATE


def overdue_cutoff(now: datetime, deadline: timedelta) -> str:
    """A run queued before this stamp and still without an outcome is overdue now. Pure."""
    return format_timestamp(now - deadline)


def is_overdue(queued_at: str, now: datetime, deadline: timedelta) -> bool:
    """Whether a run queued at `queued_at` (as stored) is past its deadline at `now`. Pure."""
    return bool(queued_at) and parse_timestamp(queued_at) < now - deadline


@dataclass(frozen=True)
class EndedCount:
    """A run counted at its end: its files were on time, or late."""

    verdict: Verdict
    files: int


def ended_count(record: RunRecord, deadline: timedelta) -> EndedCount | None:
    """What a terminal write counted: the run's files on time or late, or None when its record
    says it was not counted at its end (the reconciler counted it overdue first). Pure."""
    if not record.status.is_terminal or record.deadline_counted != DeadlineCount.ENDED:
        return None
    queued = parse_timestamp(record.queued_at or record.started_at)
    return EndedCount(verdict(queued, parse_timestamp(record.updated_at), deadline), len(record.files))


def count_ended(store: TrackingProtocol, run: RunRef, deadline: timedelta) -> EndedCount | None:
    """Count a terminal run's files as on time or late, once, by a write of its own (for an end
    no write of the workflow counted): None when the run is not terminal, is gone, or was counted
    before (at its end, or overdue)."""
    record = store.count_ended(run)
    return ended_count(record, deadline) if record is not None else None
