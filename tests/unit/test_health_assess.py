"""The health assessment: one frozen healthy snapshot, one field changed per case."""

from __future__ import annotations

from dataclasses import replace

from monitors.health import HealthSnapshot, QueueDepth, assess

HEALTHY = HealthSnapshot(
    taken_at="2026-11-29T20:00:00.000000Z",
    main_queue=QueueDepth(visible=3, in_flight=1, delayed=0),
    dead_letter_depth=0,
    tracker_dead_letter_depth=0,
    ingest_dead_letter_depth=0,
    oldest_message_age_seconds=12.0,
    active_count=2,
    holders={"run-a": "t", "run-b": "t"},
    max_concurrency=10,
    running_executions=2,
)


def codes(snapshot: HealthSnapshot) -> set[str]:
    return {finding.code for finding in assess(snapshot)}


def test_a_healthy_pipeline_has_no_findings() -> None:
    assert assess(HEALTHY) == []


def test_messages_in_any_dlq_are_critical() -> None:
    assert codes(replace(HEALTHY, dead_letter_depth=1)) == {"DlqNotEmpty"}
    assert codes(replace(HEALTHY, tracker_dead_letter_depth=2)) == {"TrackerDlqNotEmpty"}
    assert codes(replace(HEALTHY, ingest_dead_letter_depth=1)) == {"IngestDlqNotEmpty"}


def test_a_count_that_disagrees_with_its_holders_is_drift() -> None:
    assert "CounterDrift" in codes(replace(HEALTHY, active_count=3))


def test_every_slot_held_with_nothing_running_is_a_stall() -> None:
    stalled = replace(HEALTHY, active_count=10, holders={f"h{i}": "t" for i in range(10)}, running_executions=0)
    assert {"StalledAtCapacity", "SlotsVsExecutions"} <= codes(stalled)
    assert "CounterDrift" not in codes(stalled)
