"""The batch trigger: list the input bucket, group files into jobs, decide each job, act.

`decide` is pure: from a job's latest run (or none) and the clock it returns what to do, with the
reason as data. `BatchTrigger.run` is the shell: observe (paginated listing, latest runs in
batches), plan, then act with conditional writes, at most `max_jobs_per_run` jobs per run.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from pipeline.aws import error_code
from pipeline.config import Settings
from pipeline.jobs import JobMessage, RunRef, format_timestamp, job_id_for_key, parse_timestamp
from pipeline.status import JobStatus
from pipeline.stores.semaphore import Semaphore
from pipeline.stores.tracking import RunRecord, TrackingStore

STALE_ERROR = "StaleJobReclaimed"


class Decision(StrEnum):
    PROCESS = "process"  # never run
    SKIP_COMPLETE = "skip_complete"
    RETRY_FAILED = "retry_failed"
    SKIP_ACTIVE = "skip_active"  # active and making progress
    RECLAIM_STALE = "reclaim_stale"  # active but silent past the stale window


ACTIONABLE = frozenset({Decision.PROCESS, Decision.RETRY_FAILED, Decision.RECLAIM_STALE})


@dataclass(frozen=True)
class JobPlan:
    job_id: str
    decision: Decision
    reason: str
    files: tuple[str, ...]
    latest: RunRecord | None = None


def decide(latest: RunRecord | None, files: Iterable[str], now: datetime, stale_after: timedelta) -> tuple[Decision, str]:
    if latest is None:
        return Decision.PROCESS, "no run yet"
    if latest.status is JobStatus.COMPLETE:
        new_files = set(files) - set(latest.files)
        if new_files:
            return Decision.PROCESS, f"{len(new_files)} file(s) arrived after the last complete run"
        return Decision.SKIP_COMPLETE, "latest run is COMPLETE"
    if latest.status is JobStatus.FAILED:
        return Decision.RETRY_FAILED, f"latest run FAILED ({latest.error or 'no error recorded'})"
    silent_for = now - parse_timestamp(latest.updated_at)
    if silent_for > stale_after:
        minutes = int(silent_for.total_seconds() // 60)
        return Decision.RECLAIM_STALE, f"{latest.status.value} with no update for {minutes} min"
    return Decision.SKIP_ACTIVE, f"{latest.status.value}, updated {int(silent_for.total_seconds())} s ago"


def group_by_job(keys: Iterable[str], folder_depth: int) -> dict[str, list[str]]:
    jobs: dict[str, list[str]] = defaultdict(list)
    for key in keys:
        if not key.endswith("/"):  # folder placeholder objects are not files
            jobs[job_id_for_key(key, folder_depth)].append(key)
    return dict(jobs)


def plan(
    jobs: dict[str, list[str]],
    latest: dict[str, RunRecord],
    now: datetime,
    stale_after: timedelta,
    max_jobs: int,
) -> list[JobPlan]:
    """Every job's decision; actionable ones beyond `max_jobs` are deferred to the next run."""
    plans: list[JobPlan] = []
    budget = max_jobs
    for job_id in sorted(jobs):
        decision, reason = decide(latest.get(job_id), jobs[job_id], now, stale_after)
        if decision in ACTIONABLE:
            if budget == 0:
                continue
            budget -= 1
        plans.append(JobPlan(job_id, decision, reason, tuple(sorted(jobs[job_id])), latest.get(job_id)))
    return plans


@dataclass
class BatchReport:
    listed_files: int = 0
    jobs: int = 0
    decisions: dict[str, int] = field(default_factory=dict)
    queued: list[str] = field(default_factory=list)
    reclaimed: list[str] = field(default_factory=list)
    lost_races: list[str] = field(default_factory=list)


class BatchTrigger:
    def __init__(
        self,
        store: TrackingStore,
        semaphore: Semaphore,
        s3: Any,
        sfn: Any,
        send: Callable[[JobMessage, int], None],
        settings: Settings,
    ) -> None:
        self._store = store
        self._semaphore = semaphore
        self._s3 = s3
        self._sfn = sfn
        self._send = send
        self._settings = settings

    def list_keys(self, bucket: str) -> Iterator[str]:
        for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for obj in page.get("Contents", []):
                yield obj["Key"]

    def run(self, now: datetime) -> BatchReport:
        bucket = self._settings.require("input_bucket")
        keys = list(self.list_keys(bucket))
        jobs = group_by_job(keys, self._settings.job_folder_depth)
        latest = self._store.latest_runs(list(jobs))
        stale_after = timedelta(minutes=self._settings.stale_job_minutes)
        plans = plan(jobs, latest, now, stale_after, self._settings.max_jobs_per_run)
        report = BatchReport(listed_files=len(keys), jobs=len(jobs))
        for job in plans:
            report.decisions[job.decision.value] = report.decisions.get(job.decision.value, 0) + 1
            if job.decision is Decision.RECLAIM_STALE:
                assert job.latest is not None
                if not self.reclaim(job.latest, now):
                    report.lost_races.append(job.job_id)
                    continue
                report.reclaimed.append(job.job_id)
            if job.decision in ACTIONABLE:
                self.queue(job, bucket, now)
                report.queued.append(job.job_id)
        return report

    def reclaim(self, stale: RunRecord, now: datetime) -> bool:
        """Stop the stale run's execution, give back its slot, mark it FAILED — in that order.

        The FAILED write is conditional on the status and updated_at we observed: if the run
        moved in the meantime it is not stale, nothing is re-queued, and False is returned.
        """
        if stale.execution_arn:
            try:
                described = self._sfn.describe_execution(executionArn=stale.execution_arn)
                if described["status"] == "RUNNING":
                    self._sfn.stop_execution(
                        executionArn=stale.execution_arn, error=STALE_ERROR, cause="reclaimed by the batch trigger"
                    )
            except Exception as exc:
                if error_code(exc) != "ExecutionDoesNotExist":
                    raise
        self._semaphore.release(stale.run.execution_name)
        marked = self._store.transition(
            stale.run,
            JobStatus.FAILED,
            now,
            fields={"error": STALE_ERROR, "cause": f"no progress since {stale.updated_at}; reclaimed"},
            expected_status=stale.status,
            expected_updated_at=stale.updated_at,
        )
        return marked is not None

    def queue(self, job: JobPlan, bucket: str, now: datetime) -> RunRef:
        """QUEUED is written before the message is sent: a crash in between leaves a visible record."""
        run = RunRef(job.job_id, format_timestamp(now))
        self._store.create_run(run, job.files, bucket, now)
        self._send(JobMessage(run.job_id, run.started_at, bucket), 0)
        return run
