"""Batch-trigger decisions: one frozen baseline run, one field changed per case."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from pipeline.batch import Decision, decide, group_by_job, plan
from pipeline.jobs import format_timestamp
from pipeline.status import JobStatus
from pipeline.stores.tracking import RunRecord

NOW = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)
STALE = timedelta(minutes=30)
BASELINE = RunRecord(
    job_id="claims/",
    started_at=format_timestamp(NOW - timedelta(hours=1)),
    status=JobStatus.COMPLETE,
    updated_at=format_timestamp(NOW - timedelta(minutes=50)),
    files=("claims/a.txt", "claims/b.txt"),
)
FILES = ["claims/a.txt", "claims/b.txt"]


def test_a_job_never_run_is_processed() -> None:
    assert decide(None, FILES, NOW, STALE)[0] is Decision.PROCESS


def test_a_complete_job_is_skipped() -> None:
    assert decide(BASELINE, FILES, NOW, STALE)[0] is Decision.SKIP_COMPLETE


def test_a_complete_job_with_files_that_arrived_later_is_processed_again() -> None:
    decision, reason = decide(BASELINE, [*FILES, "claims/c.txt"], NOW, STALE)
    assert decision is Decision.PROCESS
    assert "1 file" in reason


def test_a_failed_job_is_retried() -> None:
    assert decide(replace(BASELINE, status=JobStatus.FAILED), FILES, NOW, STALE)[0] is Decision.RETRY_FAILED


@pytest.mark.parametrize("status", [JobStatus.QUEUED, JobStatus.DETECTING, JobStatus.REDACTING])
def test_an_active_job_updated_recently_is_left_alone(status: JobStatus) -> None:
    fresh = replace(BASELINE, status=status, updated_at=format_timestamp(NOW - timedelta(minutes=29)))
    assert decide(fresh, FILES, NOW, STALE)[0] is Decision.SKIP_ACTIVE


def test_an_active_job_silent_past_the_window_is_reclaimed() -> None:
    stale = replace(BASELINE, status=JobStatus.DETECTING, updated_at=format_timestamp(NOW - timedelta(minutes=31)))
    decision, reason = decide(stale, FILES, NOW, STALE)
    assert decision is Decision.RECLAIM_STALE
    assert "31 min" in reason


def test_plan_caps_actionable_jobs_per_run_but_reports_skips() -> None:
    jobs = {f"job{i:02d}/": [f"job{i:02d}/a.txt"] for i in range(60)}
    latest = {"job00/": replace(BASELINE, job_id="job00/", files=("job00/a.txt",))}
    plans = plan(jobs, latest, NOW, STALE, max_jobs=50)
    actionable = [p for p in plans if p.decision is Decision.PROCESS]
    assert len(actionable) == 50
    assert [p.decision for p in plans if p.job_id == "job00/"] == [Decision.SKIP_COMPLETE]


def test_grouping_ignores_folder_placeholders() -> None:
    assert group_by_job(["a/", "a/x.txt", "root.txt"], 1) == {"a/": ["a/x.txt"], "root.txt": ["root.txt"]}
