"""The on-time objective's rules as pure functions: a run's files on time or late at their end,
overdue with no outcome past the deadline, lost when the run their claim names does not hold them;
and the reconciler's pass over in-memory stores (each run counted once, nothing in a dry run)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from monitors.reconcile.indicators import ClaimState, RunHolding, claim_state, measure, overdue_runs
from monitors.reconcile.model import ActiveRun
from pipeline.deadline import EndedCount, Verdict, count_ended, ended_count, is_overdue, verdict
from pipeline.jobs import RunRef, format_timestamp
from pipeline.status import DeadlineCount, JobStatus
from pipeline.stores.claims import ObjectClaim, UnsettledClaim
from tests.property.memory import MemoryClaims, MemoryTrackingStore

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
DEADLINE = timedelta(minutes=15)


def test_a_run_that_ends_within_the_deadline_is_on_time_the_deadline_itself_included() -> None:
    queued = NOW - timedelta(minutes=20)
    assert verdict(queued, queued + timedelta(minutes=3), DEADLINE) is Verdict.ON_TIME
    assert verdict(queued, queued + DEADLINE, DEADLINE) is Verdict.ON_TIME
    assert verdict(queued, queued + DEADLINE + timedelta(microseconds=1), DEADLINE) is Verdict.LATE


def test_a_run_is_overdue_only_past_its_deadline_and_only_when_its_start_is_known() -> None:
    assert is_overdue(format_timestamp(NOW - timedelta(minutes=16)), NOW, DEADLINE)
    assert not is_overdue(format_timestamp(NOW - timedelta(minutes=14)), NOW, DEADLINE)
    assert not is_overdue("", NOW, DEADLINE)


def active(name: str, queued_minutes_ago: float, counted: str = "", status: JobStatus = JobStatus.DETECTING) -> ActiveRun:
    queued = format_timestamp(NOW - timedelta(minutes=queued_minutes_ago))
    return ActiveRun(
        job_id=f"{name}/",
        started_at=queued,
        status=status,
        updated_at=queued,
        execution_name=name,
        queued_at=queued,
        deadline_counted=counted,
    )


def test_overdue_runs_are_the_uncounted_ones_past_the_deadline_oldest_first_and_bounded() -> None:
    runs = [active("young", 5), active("late", 20), active("older", 40), active("counted", 60, DeadlineCount.OVERDUE)]
    assert [run.execution_name for run in overdue_runs(runs, NOW, DEADLINE)] == ["older", "late"]
    assert [run.execution_name for run in overdue_runs(runs, NOW, DEADLINE, limit=1)] == ["older"]


def unsettled(key: str, run: RunRef) -> UnsettledClaim:
    return UnsettledClaim("in", key, run, 1, format_timestamp(NOW - timedelta(minutes=30)))


def test_a_claimed_file_is_lost_when_its_run_is_gone_or_does_not_hold_it() -> None:
    run = RunRef("job/", format_timestamp(NOW))
    claim = unsettled("job/a.txt", run)
    assert claim_state(claim, None) is ClaimState.LOST
    assert claim_state(claim, RunHolding(frozenset({"job/b.txt"}), ended=True)) is ClaimState.LOST
    assert claim_state(claim, RunHolding(frozenset({"job/a.txt"}), ended=False)) is ClaimState.IN_FLIGHT
    assert claim_state(claim, RunHolding(frozenset({"job/a.txt"}), ended=True)) is ClaimState.SETTLED


# -- the pass, over the in-memory stores (the same protocol as the real ones) ----------------------


def stores_with_run(files: tuple[str, ...], queued_minutes_ago: float) -> tuple[MemoryTrackingStore, MemoryClaims, RunRef]:
    tracking = MemoryTrackingStore()
    claims = MemoryClaims(tracking)
    at = NOW - timedelta(minutes=queued_minutes_ago)
    run = RunRef("job/", format_timestamp(at))
    assert tracking.create_run(run, files, "in", at)
    for key in files:
        tracking.claims[("in", key)] = ObjectClaim("in", key, run)
    return tracking, claims, run


def observed(tracking: MemoryTrackingStore) -> list[ActiveRun]:
    return [
        ActiveRun(r.job_id, r.started_at, r.status, r.updated_at, r.run.execution_name, queued_at=r.queued_at, deadline_counted=r.deadline_counted)
        for r in (run.record() for run in tracking.runs.values())
        if r.status.is_active
    ]


def test_an_overdue_run_is_counted_once_across_passes_and_never_in_a_dry_run() -> None:
    tracking, claims, _ = stores_with_run(("job/a.txt", "job/b.txt"), queued_minutes_ago=20)
    seen = observed(tracking)  # both passes plan from this observation, as two racing reconcilers
    dry = measure(seen, tracking, claims, NOW, DEADLINE, count=False)
    assert (dry.overdue_files, dry.overdue_runs) == (0, 0)
    first = measure(seen, tracking, claims, NOW, DEADLINE, count=True)
    assert (first.overdue_files, first.overdue_runs) == (2, 1)
    assert measure(seen, tracking, claims, NOW, DEADLINE, count=True).overdue_files == 0  # the mark refuses
    assert measure(observed(tracking), tracking, claims, NOW + DEADLINE, DEADLINE, count=True).overdue_files == 0


def test_a_run_counted_overdue_that_ends_later_counts_neither_on_time_nor_late() -> None:
    tracking, claims, run = stores_with_run(("job/a.txt",), queued_minutes_ago=20)
    assert measure(observed(tracking), tracking, claims, NOW, DEADLINE, count=True).overdue_files == 1
    written = tracking.transition(run, JobStatus.COMPLETE, NOW, count_deadline=True)
    assert written is not None and ended_count(written, DEADLINE) is None
    assert count_ended(tracking, run, DEADLINE) is None


def test_the_write_that_ends_a_run_counts_it_and_nothing_counts_it_again() -> None:
    tracking, claims, run = stores_with_run(("job/a.txt",), queued_minutes_ago=5)
    written = tracking.transition(run, JobStatus.COMPLETE, NOW, count_deadline=True)
    assert written is not None and ended_count(written, DEADLINE) == EndedCount(Verdict.ON_TIME, 1)
    assert count_ended(tracking, run, DEADLINE) is None
    assert measure(observed(tracking), tracking, claims, NOW + DEADLINE * 2, DEADLINE, count=True).overdue_files == 0


def test_a_run_counted_at_its_end_is_counted_once_and_never_overdue() -> None:
    tracking, claims, run = stores_with_run(("job/a.txt", "job/b.txt"), queued_minutes_ago=20)
    assert count_ended(tracking, run, DEADLINE) is None  # not terminal yet: nothing to count
    assert tracking.transition(run, JobStatus.FAILED, NOW) is not None
    counted = count_ended(tracking, run, DEADLINE)
    assert counted is not None and (counted.verdict, counted.files) == (Verdict.LATE, 2)
    assert count_ended(tracking, run, DEADLINE) is None  # a repeated status event
    assert measure(observed(tracking), tracking, claims, NOW, DEADLINE, count=True).overdue_files == 0


def test_a_file_removed_from_its_run_is_lost_until_uploaded_again_and_a_finished_file_is_settled() -> None:
    tracking, claims, run = stores_with_run(("job/a.txt", "job/b.txt"), queued_minutes_ago=20)
    tracking.runs[run].files = ("job/b.txt",)  # a.txt removed from its run by hand
    assert tracking.transition(run, JobStatus.COMPLETE, NOW) is not None
    found = measure([], tracking, claims, NOW, DEADLINE, count=True)
    assert (found.lost_files, found.settled) == (1, 1)  # a.txt lost; b.txt had its outcome: settled
    assert measure([], tracking, claims, NOW, DEADLINE, count=True).claims_read == 1  # only a.txt is read again
    # Uploaded again: a new claim names a new (young) run that holds it.
    again = RunRef("job/", format_timestamp(NOW))
    assert tracking.create_run(again, ("job/a.txt",), "in", NOW)
    tracking.claims[("in", "job/a.txt")] = ObjectClaim("in", "job/a.txt", again, revision=2)
    assert measure([], tracking, claims, NOW, DEADLINE, count=True).lost_files == 0


def test_a_dry_run_reports_lost_files_but_settles_nothing() -> None:
    tracking, claims, run = stores_with_run(("job/a.txt",), queued_minutes_ago=20)
    assert tracking.transition(run, JobStatus.COMPLETE, NOW) is not None
    assert measure([], tracking, claims, NOW, DEADLINE, count=False).settled == 0
    assert measure([], tracking, claims, NOW, DEADLINE, count=True).settled == 1


def test_a_failing_read_of_the_claims_reports_no_lost_files_and_keeps_the_overdue_count() -> None:
    """An index that cannot be queried yet (being built after a stack update) must not lose the
    overdue marks already made: they are never made again, so they are emitted from this pass."""
    tracking, _, _ = stores_with_run(("job/a.txt",), queued_minutes_ago=20)

    def index_not_ready(label: str) -> None:
        if label == "claims.unsettled_claims":
            raise RuntimeError("index is being created")

    found = measure(observed(tracking), tracking, MemoryClaims(tracking, hook=index_not_ready), NOW, DEADLINE, count=True)
    assert (found.overdue_files, found.lost_files, found.errors) == (1, None, ("lost: RuntimeError",))
