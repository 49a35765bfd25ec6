"""Re-running failed runs, decided: which runs may be re-run, which files, under which new run. Pure.

A re-run is a new run of the same job (a new `started_at`, so a new deterministic execution name):
the failed run stays as history, marked with the re-run's start. A run may be re-run while it is
its job's latest run and carries no such mark: a later run (the batch trigger's retry, a new
upload, an earlier re-run) supersedes it. A FAILED run is re-run with all its files; a COMPLETE
run whose files failed (`file-failure-rate`) with those files only.

Evidence is PII-safe: run ids, file keys, error names and counts, never a cause's text.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from monitors.failures import Failure
from pipeline.jobs import RunRef, format_timestamp, parse_timestamp
from pipeline.status import FailedFileKind, JobStatus
from pipeline.stores.tracking import RunRecord
from runbooks.automation.result import PlannedAction

RERUN = "rerun_run"
MAX_SAMPLES = 3
_FILE_FAILURES = (FailedFileKind.DETECT.value, FailedFileKind.REDACT.value)


def run_id(run: RunRef) -> str:
    return f"{run.job_id}@{run.started_at}"


def failed_keys(record: RunRecord) -> tuple[str, ...]:
    """The keys whose detection or redaction failed in a run."""
    keys = (entry.get("key") for kind in _FILE_FAILURES for entry in record.failed_files.get(kind, []) if isinstance(entry, Mapping))
    return tuple(sorted({key for key in keys if isinstance(key, str)}))


def rerun_files(record: RunRecord) -> tuple[str, ...]:
    """What a re-run processes: every file of a FAILED run, the failed files of a COMPLETE one."""
    return tuple(sorted(record.files)) if record.status is JobStatus.FAILED else failed_keys(record)


@dataclass(frozen=True)
class Candidate:
    """A failed run, and whether it may still be re-run (`blocked` says why not)."""

    record: RunRecord
    files: tuple[str, ...]
    rerun_started_at: str = ""  # the mark of an earlier re-run
    latest_started_at: str = ""  # the job's latest run

    @property
    def id(self) -> str:
        return run_id(self.record.run)

    @property
    def blocked(self) -> str:
        if self.rerun_started_at:
            return f"re-run already, as {self.record.job_id}@{self.rerun_started_at}"
        if self.latest_started_at and self.latest_started_at != self.record.started_at:
            return f"superseded by the job's later run {self.record.job_id}@{self.latest_started_at}"
        if not self.files:
            return "no file to re-run"
        return ""

    def to_dict(self) -> dict[str, Any]:
        record = self.record
        return {
            "run": self.id,
            "status": record.status.value,
            "error": record.error,
            "files": len(record.files),
            "failed_files": len(failed_keys(record)),
            "rerun_files": len(self.files),
            "rerun": f"{record.job_id}@{self.rerun_started_at}" if self.rerun_started_at else None,
            "blocked": self.blocked or None,
        }


def candidates(records: Iterable[RunRecord], latest: Mapping[str, str], marks: Mapping[str, str]) -> list[Candidate]:
    """Failed runs with what blocks each: `latest` maps a job to its latest run's start, `marks`
    a run id to its re-run's start. A COMPLETE run counts only with failed files."""
    found = []
    for record in records:
        if record.status is JobStatus.COMPLETE and not failed_keys(record):
            continue
        rid = run_id(record.run)
        found.append(Candidate(record, rerun_files(record), marks.get(rid, ""), latest.get(record.job_id, "")))
    return found


def new_start(now: datetime, latest_started_at: str) -> str:
    """The re-run's `started_at`: now, or just after the job's latest run if that is later."""
    earliest = parse_timestamp(latest_started_at) + timedelta(microseconds=1) if latest_started_at else now
    return format_timestamp(max(now, earliest))


def plan_reruns(found: Sequence[Candidate], selected: Collection[str]) -> tuple[list[PlannedAction], dict[str, str]]:
    """One action per selected run that may be re-run; every other selected id with why not."""
    by_id = {candidate.id: candidate for candidate in found}
    actions: list[PlannedAction] = []
    refused: dict[str, str] = {}
    for rid in dict.fromkeys(selected):
        candidate = by_id.get(rid)
        if candidate is None:
            refused[rid] = "not a failed run of the window (or no run of that id)"
        elif candidate.blocked:
            refused[rid] = candidate.blocked
        else:
            reason = f"{candidate.record.status.value} ({candidate.record.error or 'files failed'}): a new run of {len(candidate.files)} file(s)"
            actions.append(PlannedAction(RERUN, rid, reason, count=len(candidate.files)))
    return actions, refused


def group_failures(failures: Iterable[Failure]) -> list[dict[str, Any]]:
    """The explainer's failures by (error, state), largest first: counts, a few executions and
    file keys (never a cause: an exception's text may quote a file)."""
    groups: dict[tuple[str, str], list[Failure]] = {}
    for failure in failures:
        groups.setdefault((failure.error, failure.state), []).append(failure)
    rows = [
        {
            "error": error,
            "state": state,
            "count": len(members),
            "executions": sorted({f.execution for f in members})[:MAX_SAMPLES],
            "files": sorted({f.file_key for f in members if f.file_key})[:MAX_SAMPLES],
        }
        for (error, state), members in groups.items()
    ]
    return sorted(rows, key=lambda row: (-row["count"], row["error"], row["state"]))
