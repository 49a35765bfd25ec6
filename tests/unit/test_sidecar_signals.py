"""The sidecar reconciler's pure parts: which sample is kept between runs, and the stall signals."""

from __future__ import annotations

from monitors.reconcile.legacy import LegacySample, decide, kept
from monitors.reconcile.sidecar import Observation, runbook_answer, signals


def sample(at: str, count: int, running: int, item: str = "{}") -> LegacySample:
    return LegacySample(f"2026-01-01T00:{at}+00:00", count, item, running)


def test_an_unchanged_observation_keeps_the_older_sample_so_frequent_runs_reach_the_grace() -> None:
    first, again = sample("00:00", 3, 0), sample("02:00", 3, 0)
    assert kept(first, again) is first
    third = sample("05:00", 3, 0)
    assert decide(kept(first, again), third, grace_seconds=300).verdict == "repair"


def test_a_changed_observation_replaces_the_sample() -> None:
    first = sample("00:00", 3, 0)
    for changed in (sample("01:00", 2, 0), sample("01:00", 3, 1), sample("01:00", 3, 0, item='{"x": 1}')):
        assert kept(first, changed) is changed
    assert kept(None, first) is first


def observation(count: int, running: int, *, waiting: int = 0, max_slots: int = 3, found: bool = True) -> Observation:
    return Observation(sample("00:00", count, running), max_slots, waiting, found)


def test_slots_full_idle_is_the_max_counted_with_nothing_running() -> None:
    assert signals(None, None, observation(3, 0)).slots_full_idle
    assert signals(None, None, observation(4, 0)).slots_full_idle
    assert not signals(None, None, observation(3, 1)).slots_full_idle
    assert not signals(None, None, observation(2, 0)).slots_full_idle


def test_a_backlog_stalls_when_two_looks_see_messages_waiting_and_nothing_running() -> None:
    idle = sample("00:00", 0, 0)
    assert not signals(None, None, observation(0, 0, waiting=5)).backlog_stalled
    assert signals(idle, 5, observation(0, 0, waiting=5)).backlog_stalled
    assert not signals(idle, 0, observation(0, 0, waiting=5)).backlog_stalled
    assert not signals(idle, 5, observation(1, 1, waiting=5)).backlog_stalled
    assert not signals(idle, 5, observation(0, 0, waiting=0)).backlog_stalled


def test_a_missing_counter_item_is_implausible() -> None:
    assert signals(None, None, observation(0, 0, found=False)).implausible
    assert not signals(None, None, observation(0, 0)).implausible


def test_a_runbook_step_reads_the_run_as_the_runbook_lambda_answers() -> None:
    observed = {"observed": {"active_count": 3, "running_executions": 0, "at": "t"}}
    cases = [
        ({"verdict": "in_sync"}, "absent", 0),
        ({"verdict": "repair", "applied": True}, "cleared", 0),
        ({"verdict": "repair", "applied": None}, "remains", 1),
        ({"verdict": "remember"}, "remains", 1),
        ({"verdict": "blind", "implausible": "ResourceNotFoundException: …"}, "error", 2),
    ]
    for result, verdict, exit_code in cases:
        answer = runbook_answer("counter-drift", observed | result)
        assert (answer["verdict"], answer["exit_code"]) == (verdict, exit_code), result
        assert answer["error"] == ("ResourceNotFoundException: …" if verdict == "error" else "")
        assert answer["evidence"]["active_count"] == "3"
