"""Batch-trigger decisions about failures and changed files: bounded retries, overwrites.

Pure functions on frozen records and a fixed clock: one field changed per case.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from pipeline.batch import (
    RETRIES_EXHAUSTED,
    STALE_ERROR,
    Decision,
    RetryVerdict,
    attempts_in_series,
    changed_files,
    counts_as_attempt,
    decide,
    give_up_fields,
    needs_history,
    newest_change,
    plan,
    retry_or_give_up,
)
from pipeline.config import ConfigurationError, load_settings
from pipeline.jobs import format_timestamp
from pipeline.status import JobStatus
from pipeline.stores.tracking import RunRecord

NOW = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)
STALE = timedelta(minutes=30)
STARTED = NOW - timedelta(hours=1)
FILES = ["claims/a.txt", "claims/b.txt"]
COMPLETE = RunRecord(
    job_id="claims/",
    started_at=format_timestamp(STARTED),
    status=JobStatus.COMPLETE,
    updated_at=format_timestamp(STARTED + timedelta(minutes=10)),
    files=tuple(FILES),
)
FAILED = replace(
    COMPLETE, status=JobStatus.FAILED, error="States.TaskFailed", cause="detect failed", execution_arn="arn:x"
)
# S3 LastModified of each file: uploaded well before the run started.
UPLOADED = {key: STARTED - timedelta(minutes=5) for key in FILES}


def run_at(minutes_ago: int, status: JobStatus = JobStatus.FAILED, **changes: object) -> RunRecord:
    """A run of the job that started `minutes_ago` before NOW (an attempt unless told otherwise)."""
    started = format_timestamp(NOW - timedelta(minutes=minutes_ago))
    base = replace(FAILED, status=status, started_at=started, updated_at=started)
    return replace(base, **changes)  # type: ignore[arg-type]


# -- retry or give up ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failed", "max_attempts", "verdict"),
    [
        (0, 3, RetryVerdict.RETRY),
        (1, 3, RetryVerdict.RETRY),
        (2, 3, RetryVerdict.RETRY),
        (3, 3, RetryVerdict.GIVE_UP),
        (4, 3, RetryVerdict.GIVE_UP),  # a lower setting after more attempts: give up, never loop
        (1, 1, RetryVerdict.GIVE_UP),  # 1 attempt: never retried
    ],
)
def test_retry_or_give_up(failed: int, max_attempts: int, verdict: RetryVerdict) -> None:
    assert retry_or_give_up(failed, max_attempts) is verdict


def test_a_failed_job_with_attempts_left_is_retried() -> None:
    decision, reason = decide(FAILED, FILES, NOW, STALE, last_modified=UPLOADED, attempts=2, max_attempts=3)
    assert decision is Decision.RETRY_FAILED
    assert "attempt 3 of 3" in reason


def test_a_failed_job_whose_last_attempt_failed_is_given_up() -> None:
    decision, reason = decide(FAILED, FILES, NOW, STALE, last_modified=UPLOADED, attempts=3, max_attempts=3)
    assert decision is Decision.GIVE_UP
    assert "3 of 3" in reason and "States.TaskFailed" in reason


def test_a_job_given_up_on_is_left_alone_while_nothing_changes() -> None:
    exhausted = replace(FAILED, error=RETRIES_EXHAUSTED)
    decision, _ = decide(exhausted, FILES, NOW, STALE, last_modified=UPLOADED, attempts=0, max_attempts=3)
    assert decision is Decision.SKIP_EXHAUSTED


def test_a_job_given_up_on_is_processed_again_when_a_file_is_overwritten() -> None:
    exhausted = replace(FAILED, error=RETRIES_EXHAUSTED)
    fixed = {**UPLOADED, "claims/b.txt": NOW - timedelta(minutes=1)}
    assert decide(exhausted, FILES, NOW, STALE, last_modified=fixed)[0] is Decision.PROCESS


def test_a_job_given_up_on_is_processed_again_when_a_file_is_added() -> None:
    exhausted = replace(FAILED, error=RETRIES_EXHAUSTED)
    added = {**UPLOADED, "claims/c.txt": NOW - timedelta(minutes=1)}
    assert decide(exhausted, [*FILES, "claims/c.txt"], NOW, STALE, last_modified=added)[0] is Decision.PROCESS


# -- counting attempts -------------------------------------------------------------------------


def test_consecutive_failed_runs_are_the_attempts() -> None:
    assert attempts_in_series([run_at(5), run_at(10), run_at(15)], None) == 3


def test_a_complete_run_ends_the_series() -> None:
    runs = [run_at(5), run_at(10, JobStatus.COMPLETE), run_at(15), run_at(20)]
    assert attempts_in_series(runs, None) == 1


def test_a_give_up_ends_the_series() -> None:
    runs = [run_at(5), run_at(10, error=RETRIES_EXHAUSTED), run_at(15)]
    assert attempts_in_series(runs, None) == 1


def test_runs_started_before_the_newest_file_change_are_another_series() -> None:
    runs = [run_at(5), run_at(10), run_at(15)]
    assert attempts_in_series(runs, NOW - timedelta(minutes=12)) == 2
    # LastModified is whole seconds: a change in the very second a run started counts as seen.
    assert attempts_in_series(runs, NOW - timedelta(minutes=15)) == 3


def test_a_run_reclaimed_before_it_ever_started_is_no_attempt() -> None:
    waited = run_at(10, error=STALE_ERROR, execution_arn=None)
    ran = run_at(15, error=STALE_ERROR)
    assert not counts_as_attempt(waited)
    assert counts_as_attempt(ran)
    assert attempts_in_series([run_at(5), waited, ran], None) == 2


def test_an_active_run_is_skipped_by_the_count() -> None:
    assert attempts_in_series([run_at(5, JobStatus.DETECTING), run_at(10)], None) == 1


@pytest.mark.parametrize(
    ("latest", "wanted"),
    [
        (None, False),
        (COMPLETE, False),
        (FAILED, True),
        (replace(FAILED, error=RETRIES_EXHAUSTED), False),  # decided without history
        (
            replace(
                COMPLETE, status=JobStatus.DETECTING, updated_at=format_timestamp(NOW - timedelta(minutes=31))
            ),
            True,
        ),
        (
            replace(
                COMPLETE, status=JobStatus.DETECTING, updated_at=format_timestamp(NOW - timedelta(minutes=5))
            ),
            False,
        ),
    ],
)
def test_history_is_read_only_for_failed_or_stale_jobs(latest: RunRecord | None, wanted: bool) -> None:
    assert needs_history(latest, NOW, STALE) is wanted


def test_give_up_keeps_the_last_failure_in_the_cause() -> None:
    fields = give_up_fields(FAILED, 3, 3)
    assert fields["error"] == RETRIES_EXHAUSTED
    assert fields["cause"] == "3 of 3 attempts failed; last: States.TaskFailed: detect failed"
    assert fields["last_error"] == "States.TaskFailed"


def test_plan_gives_up_outside_the_budget_of_jobs_to_queue() -> None:
    jobs = {"a/": ["a/x.txt"], "b/": ["b/x.txt"]}
    latest = {
        "a/": replace(FAILED, job_id="a/", files=("a/x.txt",)),
        "b/": replace(FAILED, job_id="b/", files=("b/x.txt",)),
    }
    plans = plan(jobs, latest, NOW, STALE, max_jobs=1, attempts={"a/": 3, "b/": 1}, max_attempts=3)
    assert [(p.job_id, p.decision, p.attempts) for p in plans] == [
        ("a/", Decision.GIVE_UP, 3),
        ("b/", Decision.RETRY_FAILED, 1),
    ]


# -- overwritten files ---------------------------------------------------------------------------


def test_a_complete_job_whose_file_was_overwritten_after_its_run_started_is_processed() -> None:
    overwritten = {**UPLOADED, "claims/a.txt": STARTED + timedelta(seconds=1)}
    decision, reason = decide(COMPLETE, FILES, NOW, STALE, last_modified=overwritten)
    assert decision is Decision.PROCESS
    assert "1 file(s) new or changed" in reason


def test_a_file_written_before_or_in_the_second_the_run_started_is_not_a_change() -> None:
    same_second = {**UPLOADED, "claims/a.txt": STARTED}
    assert decide(COMPLETE, FILES, NOW, STALE, last_modified=same_second)[0] is Decision.SKIP_COMPLETE
    assert decide(COMPLETE, FILES, NOW, STALE, last_modified=UPLOADED)[0] is Decision.SKIP_COMPLETE


def test_changed_files_are_new_keys_and_newer_versions() -> None:
    listing = {**UPLOADED, "claims/a.txt": NOW, "claims/c.txt": STARTED - timedelta(days=1)}
    assert changed_files(COMPLETE, [*FILES, "claims/c.txt"], listing) == ["claims/a.txt", "claims/c.txt"]


def test_newest_change_of_a_job() -> None:
    assert newest_change(FILES, UPLOADED) == STARTED - timedelta(minutes=5)
    assert newest_change(["claims/unknown.txt"], UPLOADED) is None


# -- the setting -------------------------------------------------------------------------------


def test_batch_max_attempts_resolves_from_the_environment_with_a_floor_of_one() -> None:
    assert load_settings({}).batch_max_attempts == 3
    assert load_settings({"BATCH_MAX_ATTEMPTS": "5"}).batch_max_attempts == 5
    with pytest.raises(ConfigurationError, match="BATCH_MAX_ATTEMPTS"):
        load_settings({"BATCH_MAX_ATTEMPTS": "0"})


def test_the_template_passes_its_parameter_to_every_function() -> None:
    from stack.template import load_template

    template = load_template()
    parameter = template["Parameters"]["BatchMaxAttempts"]
    assert (parameter["Type"], parameter["Default"], parameter["MinValue"]) == ("Number", 3, 1)
    variables = template["Globals"]["Function"]["Environment"]["Variables"]
    assert variables["BATCH_MAX_ATTEMPTS"] == {"Ref": "BatchMaxAttempts"}


def test_the_give_up_reason_shows_in_the_jobs_table() -> None:
    from rich.console import Console

    from pipeops.render import runs_table
    from pipeops.views import run_summary

    fields = give_up_fields(FAILED, 3, 3)
    given_up = replace(FAILED, error=fields["error"], cause=fields["cause"])
    console = Console(record=True, width=160)
    console.print(runs_table("runs", [run_summary(given_up)]))
    assert RETRIES_EXHAUSTED in console.export_text()
