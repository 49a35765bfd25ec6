"""Legacy mode: a plain counter is repaired only when two observations a grace window apart agree."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from monitors.reconcile.legacy import LegacySample, decide

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
STALLED = LegacySample(T0.isoformat(), count=5, item='{"active_count": {"N": "5"}}', running=0)
LATER = replace(STALLED, taken_at=(T0 + timedelta(minutes=5)).isoformat())


def test_a_counter_equal_to_the_running_executions_is_in_sync() -> None:
    assert decide(None, replace(STALLED, count=0), 120).verdict == "in_sync"


def test_the_first_observation_of_drift_is_only_remembered() -> None:
    assert decide(None, STALLED, 120).verdict == "remember"


def test_a_second_observation_too_soon_is_only_remembered() -> None:
    soon = replace(STALLED, taken_at=(T0 + timedelta(seconds=30)).isoformat())
    assert decide(STALLED, soon, 120).verdict == "remember"


def test_two_agreeing_observations_a_grace_apart_repair_to_the_running_count() -> None:
    decision = decide(STALLED, LATER, 120)
    assert (decision.verdict, decision.set_to, decision.expected_count) == ("repair", 0, 5)


def test_a_counter_written_in_between_is_not_repaired() -> None:
    moved = replace(LATER, item='{"active_count": {"N": "5"}, "touched": {"S": "x"}}')
    assert decide(STALLED, moved, 120).verdict == "changing"


def test_executions_that_started_or_ended_in_between_are_not_repaired() -> None:
    assert decide(STALLED, replace(LATER, running=1), 120).verdict == "changing"


def test_a_counter_below_the_running_executions_is_raised_too() -> None:
    low = replace(STALLED, count=1, item="{}", running=3)
    decision = decide(low, replace(low, taken_at=LATER.taken_at), 120)
    assert (decision.verdict, decision.set_to) == ("repair", 3)
