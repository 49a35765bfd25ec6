"""The batch trigger: list the input bucket, group files into jobs, decide each job, act.

The decisions are pure: from a job's latest run (or none), the objects in its folder, its failed
attempts and the clock, `decide` returns what to do with the reason as data. `BatchTrigger.run`
is the shell: observe (paginated listing, latest runs in batches, the run history of failed or
stale jobs only), plan, then act with conditional writes, at most `max_jobs_per_run` jobs per run.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from itertools import groupby
from typing import Any

from pipeline.aws import error_code
from pipeline.config import Settings
from pipeline.jobs import (
    JobMessage,
    RunRef,
    format_timestamp,
    is_folder_marker,
    job_id_for_key,
    parse_timestamp,
)
from pipeline.repairs import STALE_ERROR, finish_stale, stop_and_fail_stale
from pipeline.status import JobStatus
from pipeline.stores.executions import ExecutionsStore
from pipeline.stores.semaphore import ReleaseResult, Semaphore
from pipeline.stores.tracking import RunRecord, TrackingStore

# Named in the cause of the StopExecution a reclaim makes.
STOPPED_BY = "the batch trigger"
# Written as the `error` of a job's latest run when its last attempt failed: `pipeops jobs` shows it.
RETRIES_EXHAUSTED = "retries_exhausted"
# Runs read per job to count its attempts: enough for the largest sensible BatchMaxAttempts plus
# runs that never started (reclaimed while QUEUED), which the count skips.
HISTORY_SLACK = 20


class Decision(StrEnum):
    PROCESS = "process"  # never run, or its folder changed since its last run
    SKIP_COMPLETE = "skip_complete"
    RETRY_FAILED = "retry_failed"
    GIVE_UP = "give_up"  # the last attempt failed: record why, queue nothing
    SKIP_EXHAUSTED = "skip_exhausted"  # given up before and nothing changed since
    SKIP_ACTIVE = "skip_active"  # active and making progress
    RECLAIM_STALE = "reclaim_stale"  # active but silent past the stale window


ACTIONABLE = frozenset({Decision.PROCESS, Decision.RETRY_FAILED, Decision.RECLAIM_STALE})


class RetryVerdict(StrEnum):
    RETRY = "retry"
    GIVE_UP = "give_up"


@dataclass(frozen=True)
class JobPlan:
    job_id: str
    decision: Decision
    reason: str
    files: tuple[str, ...]
    latest: RunRecord | None = None
    attempts: int = 0  # failed attempts of the current series, before this decision
    newest_change: datetime | None = None  # the newest LastModified among the job's files


def retry_or_give_up(failed_attempts: int, max_attempts: int) -> RetryVerdict:
    """After `failed_attempts` failed runs of one series, may the job run once more?

    Bounded so that a job that can never succeed (a file the detector rejects, a bug) stops
    costing an execution every schedule tick and becomes a visible FAILED job to look at.
    `max_attempts` counts runs, the first included: 1 means never retried.
    """
    return RetryVerdict.RETRY if failed_attempts < max_attempts else RetryVerdict.GIVE_UP


def counts_as_attempt(record: RunRecord) -> bool:
    """Whether a FAILED run spent one of the job's attempts.

    A run the trigger reclaimed before any execution was recorded for it (typically QUEUED
    behind full slots for the whole stale window) never ran the job: counting it would give up
    on a job that only waited. Every other FAILED run did run, or was refused for its content.
    """
    if record.status is not JobStatus.FAILED:
        return False
    return not (record.error == STALE_ERROR and record.execution_arn is None)


def attempts_in_series(runs_newest_first: Sequence[RunRecord], newest_change: datetime | None) -> int:
    """How many failed attempts the job's current series has made.

    A series ends (going back in time) at a COMPLETE run, at a run whose failure was already
    given up on, or at a run that started before the newest change to the job's files: a new
    or overwritten file deserves fresh attempts. Active runs and runs that never started are
    skipped. Strict comparison, as in `changed_files`: S3 LastModified is whole seconds.
    The runs one tick split a folder into (`split_files`) are one attempt: it failed if any of
    them failed, and it ends the series as COMPLETE only if all of them completed.
    """
    count = 0
    for tick in ticks(runs_newest_first):
        if newest_change is not None and any(newest_change > parse_timestamp(r.started_at) for r in tick):
            break
        if any(r.status is JobStatus.FAILED and r.error == RETRIES_EXHAUSTED for r in tick):
            break
        if any(counts_as_attempt(r) for r in tick):
            count += 1
        elif all(r.status is JobStatus.COMPLETE for r in tick):
            break
    return count


def tick_of(record: RunRecord) -> str:
    """The runs one batch tick created for one folder share their `queued_at` (the tick's clock);
    every other run is a tick of its own."""
    return record.queued_at or record.started_at


def ticks(runs_newest_first: Sequence[RunRecord]) -> Iterator[list[RunRecord]]:
    """Consecutive runs of one tick, grouped (the parts of a split folder sort together)."""
    for _, group in groupby(runs_newest_first, key=tick_of):
        yield list(group)


def split_files(files: Sequence[str], max_files: int) -> list[tuple[str, ...]]:
    """A folder's files in runs of at most `max_files` (MaxFilesPerRun), in key order. Pure."""
    ordered = sorted(set(files))
    if not ordered:
        return [()]
    return [tuple(ordered[start : start + max_files]) for start in range(0, len(ordered), max_files)]


def merge_parts(parts: Sequence[RunRecord]) -> RunRecord:
    """One view of the runs a tick split a folder into, for `decide`: the files of all of them,
    and the state of the part that most needs attention -- an active one (the longest silent,
    so a stale part is reclaimed), else a failed one, else the newest. Pure."""
    if not parts:
        raise ValueError("no runs to merge")
    files = tuple(sorted({key for part in parts for key in part.files}))
    active = [p for p in parts if p.status.is_active]
    failed = [p for p in parts if p.status is JobStatus.FAILED]
    if active:
        lead = min(active, key=lambda p: p.updated_at)
    elif failed:
        lead = max(failed, key=lambda p: p.started_at)
    else:
        lead = max(parts, key=lambda p: p.started_at)
    return replace(lead, files=files)


def changed_files(
    latest: RunRecord, files: Iterable[str], last_modified: Mapping[str, datetime]
) -> list[str]:
    """The job's files the latest run did not see: new keys, and keys written after it started.

    The run's `started_at` is the tick's clock reading taken before the listing, so an object
    modified later than it may be newer than what the run read: it is processed again (at most
    once too often, never missed, except an overwrite landing in the very second the run started
    and after its workflow read the file, as S3 reports LastModified in whole seconds).
    """
    started = parse_timestamp(latest.started_at)
    seen = set(latest.files)
    return sorted(
        key
        for key in set(files)
        if key not in seen or (key in last_modified and last_modified[key] > started)
    )


def needs_history(latest: RunRecord | None, now: datetime, stale_after: timedelta) -> bool:
    """Whether deciding this job needs its earlier runs (to count attempts): failed or stale only."""
    if latest is None:
        return False
    if latest.status is JobStatus.FAILED:
        return latest.error != RETRIES_EXHAUSTED
    return latest.status.is_active and now - parse_timestamp(latest.updated_at) > stale_after


def decide(
    latest: RunRecord | None,
    files: Iterable[str],
    now: datetime,
    stale_after: timedelta,
    *,
    last_modified: Mapping[str, datetime] | None = None,
    attempts: int = 0,
    max_attempts: int = 3,
) -> tuple[Decision, str]:
    """What to do with one job, and why. Pure: every input is observed data or the clock.

    `attempts` is `attempts_in_series` over the job's runs (only read for failed or stale jobs);
    `last_modified` maps each of the job's keys to its S3 LastModified.
    """
    if latest is None:
        return Decision.PROCESS, "no run yet"
    if latest.status is JobStatus.COMPLETE:
        changed = changed_files(latest, files, last_modified or {})
        if changed:
            return Decision.PROCESS, f"{len(changed)} file(s) new or changed since the last complete run"
        return Decision.SKIP_COMPLETE, "latest run is COMPLETE"
    if latest.status is JobStatus.FAILED:
        if latest.error == RETRIES_EXHAUSTED:
            changed = changed_files(latest, files, last_modified or {})
            if changed:
                return Decision.PROCESS, f"gave up before; {len(changed)} file(s) new or changed since"
            return Decision.SKIP_EXHAUSTED, "gave up after the last attempt; no file changed since"
        if retry_or_give_up(attempts, max_attempts) is RetryVerdict.GIVE_UP:
            return (
                Decision.GIVE_UP,
                f"{attempts} of {max_attempts} attempts failed ({latest.error or 'no error recorded'})",
            )
        return Decision.RETRY_FAILED, (
            f"latest run FAILED ({latest.error or 'no error recorded'}); attempt {attempts + 1} of {max_attempts}"
        )
    silent_for = now - parse_timestamp(latest.updated_at)
    if silent_for > stale_after:
        minutes = int(silent_for.total_seconds() // 60)
        return Decision.RECLAIM_STALE, f"{latest.status.value} with no update for {minutes} min"
    return Decision.SKIP_ACTIVE, f"{latest.status.value}, updated {int(silent_for.total_seconds())} s ago"


def group_by_job(keys: Iterable[str], folder_depth: int) -> dict[str, list[str]]:
    jobs: dict[str, list[str]] = defaultdict(list)
    for key in keys:
        if not is_folder_marker(key):  # the rule realtime ingest applies too
            jobs[job_id_for_key(key, folder_depth)].append(key)
    return dict(jobs)


def newest_change(files: Iterable[str], last_modified: Mapping[str, datetime]) -> datetime | None:
    """The latest LastModified among a job's files (None when none is known)."""
    moments = [last_modified[key] for key in files if key in last_modified]
    return max(moments) if moments else None


def plan(
    jobs: dict[str, list[str]],
    latest: dict[str, RunRecord],
    now: datetime,
    stale_after: timedelta,
    max_jobs: int,
    *,
    last_modified: Mapping[str, datetime] | None = None,
    attempts: Mapping[str, int] | None = None,
    max_attempts: int = 3,
) -> list[JobPlan]:
    """Every job's decision; actionable ones beyond `max_jobs` are deferred to the next run.

    Giving up queues nothing (one small write), so it is not held back by the budget.
    """
    plans: list[JobPlan] = []
    budget = max_jobs
    for job_id in sorted(jobs):
        tried = (attempts or {}).get(job_id, 0)
        decision, reason = decide(
            latest.get(job_id),
            jobs[job_id],
            now,
            stale_after,
            last_modified=last_modified,
            attempts=tried,
            max_attempts=max_attempts,
        )
        if decision in ACTIONABLE:
            if budget == 0:
                continue
            budget -= 1
        files = tuple(sorted(jobs[job_id]))
        changed_at = newest_change(files, last_modified or {})
        plans.append(JobPlan(job_id, decision, reason, files, latest.get(job_id), tried, changed_at))
    return plans


def give_up_fields(record: RunRecord, attempts: int, max_attempts: int) -> dict[str, str]:
    """What a give-up writes on the latest run: the reason first, the last failure kept in `cause`."""
    last = record.error or "no error recorded"
    detail = f"{last}: {record.cause}" if record.cause else last
    return {
        "error": RETRIES_EXHAUSTED,
        "cause": f"{attempts} of {max_attempts} attempts failed; last: {detail}",
        "last_error": last,
    }


def record_give_up(
    dynamodb: Any, table: str, record: RunRecord, fields: Mapping[str, str], now: datetime
) -> bool:
    """Write the give-up on a FAILED run, conditional on the run being as observed. Once only.

    The status stays FAILED (terminal); only the reason changes, so the forward-only rule holds.
    `updated_at` moves so the run lists first in `pipeops jobs`. False when the run changed (a
    concurrent trigger gave up first, or the observation is outdated): nothing was written.
    """
    names = {"#status": "status", "#updated": "updated_at"}
    values: dict[str, Any] = {
        ":failed": {"S": JobStatus.FAILED.value},
        ":observed": {"S": record.updated_at},
        ":now": {"S": format_timestamp(now)},
        ":exhausted": {"S": RETRIES_EXHAUSTED},
    }
    sets = ["#updated = :now"]
    for index, (name, value) in enumerate(fields.items()):
        names[f"#f{index}"] = name
        values[f":f{index}"] = {"S": value}
        sets.append(f"#f{index} = :f{index}")
    try:
        dynamodb.update_item(
            TableName=table,
            Key={"job_id": {"S": record.job_id}, "started_at": {"S": record.started_at}},
            UpdateExpression="SET " + ", ".join(sets),
            ConditionExpression=(
                "#status = :failed AND #updated = :observed AND (attribute_not_exists(#error) OR #error <> :exhausted)"
            ),
            ExpressionAttributeNames={**names, "#error": "error"},
            ExpressionAttributeValues=values,
        )
    except Exception as exc:
        if error_code(exc) == "ConditionalCheckFailedException":
            return False
        raise
    return True


@dataclass
class BatchReport:
    listed_files: int = 0
    jobs: int = 0
    decisions: dict[str, int] = field(default_factory=dict)
    queued: list[str] = field(default_factory=list)
    reclaimed: list[str] = field(default_factory=list)
    gave_up: list[str] = field(default_factory=list)
    lost_races: list[str] = field(default_factory=list)
    slots_released: int = 0  # by reclaims: SlotsReleased counts every releaser, not just the tracker


@dataclass(frozen=True)
class ListedObject:
    key: str
    last_modified: datetime


class BatchTrigger:
    def __init__(
        self,
        store: TrackingStore,
        semaphore: Semaphore,
        s3: Any,
        executions: ExecutionsStore,
        send: Callable[[JobMessage, int], object],
        settings: Settings,
        dynamodb: Any,
    ) -> None:
        """`dynamodb` (a boto3 client) writes the give-up, which the tracking store has no method for."""
        self._store = store
        self._semaphore = semaphore
        self._s3 = s3
        self._executions = executions
        self._send = send
        self._settings = settings
        self._dynamodb = dynamodb

    def list_objects(self, bucket: str) -> Iterator[ListedObject]:
        for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for obj in page.get("Contents", []):
                yield ListedObject(obj["Key"], obj["LastModified"])

    def run(self, now: datetime) -> BatchReport:
        bucket = self._settings.require("input_bucket")
        objects = list(self.list_objects(bucket))
        last_modified = {obj.key: obj.last_modified for obj in objects}
        jobs = group_by_job(last_modified, self._settings.job_folder_depth)
        latest = self._store.latest_runs(list(jobs))
        max_files = self._settings.max_files_per_run
        for job_id, record in list(latest.items()):
            if len(jobs.get(job_id, ())) > max_files:  # a split folder: its latest tick has parts
                latest[job_id] = self.latest_tick(record, self._parts(jobs[job_id]))
        stale_after = timedelta(minutes=self._settings.stale_job_minutes)
        max_attempts = self._settings.batch_max_attempts
        attempts = {
            job_id: attempts_in_series(
                self._store.runs_of(job_id, limit=(max_attempts + HISTORY_SLACK) * self._parts(jobs[job_id])),
                newest_change(jobs[job_id], last_modified),
            )
            for job_id, record in latest.items()
            if job_id in jobs and needs_history(record, now, stale_after)
        }
        plans = plan(
            jobs,
            latest,
            now,
            stale_after,
            self._settings.max_jobs_per_run,
            last_modified=last_modified,
            attempts=attempts,
            max_attempts=max_attempts,
        )
        report = BatchReport(listed_files=len(objects), jobs=len(jobs))
        for job in plans:
            report.decisions[job.decision.value] = report.decisions.get(job.decision.value, 0) + 1
            self._act(job, bucket, now, report)
        return report

    def _act(self, job: JobPlan, bucket: str, now: datetime, report: BatchReport) -> None:
        latest, attempts = job.latest, job.attempts
        if job.decision is Decision.RECLAIM_STALE:
            assert latest is not None
            reclaimed = self.reclaim(latest, now, report)
            if reclaimed is None:
                report.lost_races.append(job.job_id)
                return
            report.reclaimed.append(job.job_id)
            latest = reclaimed
            attempts += attempts_in_series([reclaimed], job.newest_change)  # 1 if it ran these files
            if retry_or_give_up(attempts, self._settings.batch_max_attempts) is RetryVerdict.GIVE_UP:
                self._give_up(job.job_id, latest, attempts, now, report)
                return
        elif job.decision in (Decision.RETRY_FAILED, Decision.GIVE_UP):
            assert latest is not None
            if latest.error == STALE_ERROR:  # a reclaim interrupted after its claim: finish it first
                self.settle(latest, report)
            if job.decision is Decision.GIVE_UP:
                self._give_up(job.job_id, latest, attempts, now, report)
                return
        if job.decision in ACTIONABLE:
            self.queue(job, bucket, now)
            report.queued.append(job.job_id)

    def _give_up(
        self, job_id: str, record: RunRecord, attempts: int, now: datetime, report: BatchReport
    ) -> None:
        fields = give_up_fields(record, attempts, self._settings.batch_max_attempts)
        table = self._settings.require("tracking_table")
        if record_give_up(self._dynamodb, table, record, fields, now):
            report.gave_up.append(job_id)
        else:
            report.lost_races.append(job_id)

    def reclaim(self, stale: RunRecord, now: datetime, report: BatchReport | None = None) -> RunRecord | None:
        """Claim the stale run, then stop its execution, then give back its slot — in that order
        (`pipeline.repairs.stop_and_fail_stale`). None: the run moved since the snapshot, so it is
        not stale and nothing at all was done. Returns the run as written."""
        repair = stop_and_fail_stale(
            self._store,
            self._semaphore,
            self._executions,
            stale,
            now,
            stopped_by=STOPPED_BY,
        )
        self._count_release(repair.released, report)
        return repair.reclaimed

    def settle(self, reclaimed: RunRecord, report: BatchReport | None = None) -> None:
        """Finish a reclaim interrupted after its claim: stop the execution if it runs, then release
        its slot (`pipeline.repairs.finish_stale`). Idempotent. A failing StopExecution raises with
        the slot still held; the next tick finds the run FAILED as reclaimed and settles it again."""
        released = finish_stale(self._semaphore, self._executions, reclaimed, stopped_by=STOPPED_BY)
        self._count_release(released, report)

    @staticmethod
    def _count_release(released: ReleaseResult | None, report: BatchReport | None) -> None:
        if report is not None and released is ReleaseResult.RELEASED:
            report.slots_released += 1

    def _parts(self, files: Sequence[str]) -> int:
        return max(1, math.ceil(len(files) / self._settings.max_files_per_run))

    def latest_tick(self, latest: RunRecord, parts: int) -> RunRecord:
        """The job's latest tick as one record (`merge_parts`): the runs sharing the latest run's
        tick, among the job's newest runs (its parts sort together, the latest last)."""
        siblings = [r for r in self._store.runs_of(latest.job_id, limit=parts + HISTORY_SLACK) if tick_of(r) == tick_of(latest)]
        return merge_parts(siblings or [latest])

    def queue(self, job: JobPlan, bucket: str, now: datetime) -> RunRef:
        """QUEUED is written before the message is sent: a crash in between leaves a visible record.

        A folder of more than MaxFilesPerRun files becomes several runs ("parts") of this tick:
        same `queued_at`, `started_at` a microsecond apart, the head at the last. Returns it."""
        run = RunRef(job.job_id, format_timestamp(now))
        for index, files in enumerate(split_files(job.files, self._settings.max_files_per_run)):
            run = RunRef(job.job_id, format_timestamp(now + timedelta(microseconds=index)))
            self._store.create_run(run, files, bucket, now)
            self._send(JobMessage(run.job_id, run.started_at, bucket), 0)
        return run
