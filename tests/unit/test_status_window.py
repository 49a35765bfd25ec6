"""What `pipeops status` and `pipeops jobs` compute from what they read: windows, caps and merging
(tests/unit/test_status_findings.py: how the status table shows a capped count)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from monitors.snapshot import (
    OutcomeWindow,
    count_since,
    recent_outcomes,
    window_label,
)
from pipeline.jobs import format_timestamp
from pipeline.status import JobStatus
from pipeline.stores.tracking import RunRecord
from pipeops.views import merge_newest
from tests.conftest import quiet_snapshot

NOW = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)


def ago(**delta: float) -> str:
    return format_timestamp(NOW - timedelta(**delta))


def test_windows_are_named_in_the_largest_whole_unit() -> None:
    assert [window_label(timedelta(**w)) for w in ({"hours": 1}, {"hours": 24}, {"minutes": 30}, {"seconds": 90})] == [
        "1h",
        "24h",
        "30m",
        "90s",
    ]


def test_a_complete_read_counts_exactly_what_falls_inside_the_window() -> None:
    stamps = [ago(minutes=5), ago(minutes=50), ago(hours=3)]
    assert count_since(stamps, False, ago(hours=1)) == (2, True)
    assert count_since([], False, ago(hours=1)) == (0, True)


def test_a_read_cut_at_the_cap_is_exact_only_for_the_windows_it_read_past() -> None:
    stamps = [ago(minutes=5), ago(minutes=50), ago(hours=3)]  # newest first, more left unread
    assert count_since(stamps, True, ago(hours=1)) == (2, True)  # the read went past the hour
    assert count_since(stamps, True, ago(hours=24)) == (3, False)  # a lower bound
    assert count_since([], True, ago(hours=1)) == (0, False)


def test_ended_runs_are_counted_per_window_shortest_first_with_each_window_start() -> None:
    ended = {
        JobStatus.COMPLETE: ([ago(minutes=1), ago(minutes=59), ago(hours=2), ago(hours=23)], False),
        JobStatus.FAILED: ([ago(hours=5)], False),
    }
    short, wide = recent_outcomes(ended, NOW, (timedelta(hours=1), timedelta(hours=24)))
    assert short == OutcomeWindow("1h", ago(hours=1), {"COMPLETE": 2, "FAILED": 0})
    assert wide == OutcomeWindow("24h", ago(hours=24), {"COMPLETE": 4, "FAILED": 1})


def test_a_capped_status_is_a_lower_bound_only_in_the_windows_it_did_not_read_through() -> None:
    ended = {JobStatus.COMPLETE: ([ago(minutes=1), ago(hours=2)], True), JobStatus.FAILED: ([ago(hours=3)], False)}
    short, wide = recent_outcomes(ended, NOW, (timedelta(hours=1), timedelta(hours=24)))
    assert short.lower_bounds == () and short.counts["COMPLETE"] == 1
    assert wide.lower_bounds == ("COMPLETE",) and wide.counts == {"COMPLETE": 2, "FAILED": 1}


BASE = quiet_snapshot(NOW)


def test_jobs_by_status_is_every_active_run_and_the_widest_windows_ended_runs_non_zero_only() -> None:
    windows = (
        OutcomeWindow("1h", ago(hours=1), {"COMPLETE": 1, "FAILED": 0}),
        OutcomeWindow("24h", ago(hours=24), {"COMPLETE": 7, "FAILED": 0}),
    )
    snapshot = replace(BASE, active_runs={"QUEUED": 2, "REDACTING": 1}, recent_outcomes=windows)
    assert snapshot.jobs_by_status == {"QUEUED": 2, "REDACTING": 1, "COMPLETE": 7}
    data = snapshot.to_dict()
    assert data["jobs_by_status"] == {"QUEUED": 2, "REDACTING": 1, "COMPLETE": 7}
    assert data["jobs_by_status_window"] == "24h"
    assert [w["window"] for w in data["recent_outcomes"]] == ["1h", "24h"]
    assert replace(BASE).to_dict()["jobs_by_status"] == {}


def run(job: str, updated: str, status: JobStatus = JobStatus.COMPLETE) -> RunRecord:
    return RunRecord(job_id=job, started_at=updated, status=status, updated_at=updated)


def test_merging_per_status_lists_keeps_the_newest_across_them() -> None:
    complete = [run("a", ago(minutes=1)), run("b", ago(minutes=10)), run("c", ago(minutes=30))]
    failed = [run("d", ago(minutes=5), JobStatus.FAILED), run("e", ago(hours=2), JobStatus.FAILED)]
    queued = [run("f", ago(minutes=20), JobStatus.QUEUED)]
    assert [r.job_id for r in merge_newest([complete, failed, queued], 4)] == ["a", "d", "b", "f"]
    assert [r.job_id for r in merge_newest([complete, failed], 10)] == ["a", "d", "b", "c", "e"]
    assert merge_newest([complete], 0) == []
