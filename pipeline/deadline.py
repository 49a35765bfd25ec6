"""The "files done on time" indicators: done on time, missed (failed or late), overdue; each
file counted once (docs/ARCHITECTURE.md#on-time-indicators).

A file's clock starts when its run was queued (`queued_at`): ingest writes it in the transaction
that accepts the run's first file, the earliest moment the pipeline knows of any of its files (a
file that joined the run later is measured from the same start, so no file looks on time that
was not; S3's event time is not kept). It stops at the run's terminal outcome, COMPLETE or
FAILED (the status enum's terminal set; unsupported and empty files end with their run): the run
record's `updated_at`, which a terminal record never changes again.

A file is done on time when its run ended COMPLETE within the deadline and the file is in
neither failed list (`failed_files` detect or redact); an unsupported or empty file is a correct
outcome with a reason, so good. Every file of a run that ended FAILED, or past the deadline, is
bad: a failed file is not done (`classify_ended`).

Every run is counted once ever, by a conditional write of `deadline_counted` on its record:
whoever wins says what its files were (some good and some bad at once). At its end, by the
write that ends it where it can (the workflow's verdict,
`TrackingStore.transition(count_deadline=True)`: no call of its own on the healthy path), else
by the tracker on a failed execution's end (`count_ended`); overdue, by the reconciler
(`count_overdue`). A run counted overdue that ends later counts nothing more; a run
counted at its end is never counted overdue. A repeated status event, a retried task, or two
reconcilers racing count it once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from pipeline.jobs import RunRef, format_timestamp, parse_timestamp
from pipeline.status import DeadlineCount, FailedFileKind, JobStatus
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
    """A run counted at its end: how many of its files were done on time (good), how many missed (bad)."""

    good: int
    bad: int


def failed_keys(failed_files: Mapping[str, Any]) -> set[str]:
    """The keys of the files whose detection or redaction failed (entries `{key, error, message}`). Pure."""
    kinds = (FailedFileKind.DETECT.value, FailedFileKind.REDACT.value)
    return {str(entry["key"]) for kind in kinds for entry in failed_files.get(kind) or () if isinstance(entry, Mapping)}


def classify_ended(
    status: JobStatus, files: Sequence[str], failed_files: Mapping[str, Any], on_time: Verdict
) -> EndedCount:
    """Good and bad files of a run at its terminal outcome. Past the deadline, or FAILED: every
    file bad. COMPLETE on time: the files in a failed list bad, the rest (unsupported and empty
    included: correct outcomes with a reason) good. Pure."""
    total = len(files)
    if on_time is Verdict.LATE or status is not JobStatus.COMPLETE:
        return EndedCount(good=0, bad=total)
    bad = len(failed_keys(failed_files) & set(files))
    return EndedCount(good=total - bad, bad=bad)


def ended_count(record: RunRecord, deadline: timedelta) -> EndedCount | None:
    """What a terminal write counted: the run's files done on time and missed, or None when its
    record says it was not counted at its end (the reconciler counted it overdue first). Pure."""
    if not record.status.is_terminal or record.deadline_counted != DeadlineCount.ENDED:
        return None
    queued = parse_timestamp(record.queued_at or record.started_at)
    on_time = verdict(queued, parse_timestamp(record.updated_at), deadline)
    return classify_ended(record.status, record.files, record.failed_files, on_time)


def count_ended(store: TrackingProtocol, run: RunRef, deadline: timedelta) -> EndedCount | None:
    """Count a terminal run's files as done on time or missed, once, by a write of its own (for an end
    no write of the workflow counted): None when the run is not terminal, is gone, or was counted
    before (at its end, or overdue)."""
    record = store.count_ended(run)
    return ended_count(record, deadline) if record is not None else None
