"""The game day's pure core: verdicts and invariants from plain observations, no AWS."""

from __future__ import annotations

from dataclasses import replace

from pipeops.gameday import invariants
from pipeops.gameday.model import AlarmChange, FaultObservation, FaultSpec, GameDayResult, Point, alarm_id
from pipeops.gameday.verdict import false_alarms, game_day_problems, judge

SPEC = FaultSpec("count-negative", "active_count set below its holders", ("CounterBelowRunning",), None)


def observed(**changes: object) -> FaultObservation:
    base = FaultObservation(
        fault=SPEC,
        started_at=10.0,
        injected_at=11.0,
        changes=(AlarmChange("CounterBelowRunning", "OK", "ALARM", 13.0, 2600.0), AlarmChange("CounterBelowRunning", "ALARM", "OK", 15.0, 3000.0)),
        notified=("CounterBelowRunning",),
        paged=True,
        cleared_at=13.5,
        ok_at=15.5,
    )
    for name, value in changes.items():
        setattr(base, name, value)
    return base


def test_a_fault_detected_notified_and_repaired_passes_with_both_times() -> None:
    verdict = judge(observed(), time_scale=0.005)
    assert verdict.passed and verdict.alarm == "CounterBelowRunning"
    assert (verdict.detect_real, verdict.detect_virtual) == (2.0, 400.0)
    assert (verdict.repair_real, verdict.repair_virtual) == (2.0, 400.0)
    assert verdict.remedy == "reconciler" and verdict.notified


def test_undetected_is_a_failure_naming_the_disabled_alarm() -> None:
    verdict = judge(observed(changes=(), disabled=("CounterBelowRunning",)), 0.005)
    assert not verdict.passed
    assert any("undetected" in p and "disabled: CounterBelowRunning" in p for p in verdict.problems)


def test_an_alarm_that_fired_before_the_injection_does_not_count_as_detection() -> None:
    early = (AlarmChange("CounterBelowRunning", "OK", "ALARM", 10.5, 2100.0),)
    assert judge(observed(changes=early), 0.005).alarm is None


def test_an_unexpected_alarm_is_no_detection_and_a_missing_notification_fails() -> None:
    other = (AlarmChange("DlqNotEmpty", "OK", "ALARM", 12.0, 2400.0),)
    assert "undetected" in judge(observed(changes=other), 0.005).problems[0]
    silent = judge(observed(notified=()), 0.005)
    assert not silent.passed and "never reached the alarm state topic" in silent.problems[0]


def test_not_back_to_ok_and_broken_invariants_fail() -> None:
    verdict = judge(observed(ok_at=None, violations=("file never reached a terminal outcome: a/b.txt",)), 0.005)
    assert verdict.repair_real is None and not verdict.invariants_held
    assert {p.split(":")[0] for p in verdict.problems} == {"not every alarm returned to OK", "invariant"}


def test_false_alarms_are_the_alarm_transitions_of_the_healthy_window_and_fail_the_day() -> None:
    changes = [AlarmChange("RouterErrors", "OK", "ALARM", 5.0, 1000.0, "3 of 5"), AlarmChange("X", "OK", "ALARM", 30.0, 6000.0)]
    false = false_alarms(changes, 0.0, 20.0)
    assert [c.alarm for c in false] == ["RouterErrors"]
    problems = game_day_problems([judge(observed(changes=()), 0.005)], false)
    assert problems[0].startswith("false alarm in the healthy phase: RouterErrors")
    assert problems[1].startswith("count-negative: undetected")


def test_invariant_checks() -> None:
    assert invariants.lost_files({"a": "redacted", "b": ""}) == ["file never reached a terminal outcome: b"]
    runs = [
        invariants.RunView("j", "1", "COMPLETE", ("j/a",), "n1"),
        invariants.RunView("j", "2", "FAILED", ("j/a",), "n2"),
        invariants.RunView("k", "1", "COMPLETE", ("k/a",), "n3"),
        invariants.RunView("k", "2", "IN_PROGRESS", ("k/a",), "n4"),
    ]
    assert invariants.runs_started_twice(runs) == ["k/a processed by 2 runs: k@1, k@2"]
    assert invariants.counter_agrees(1, ["n"], {"n"}) == []
    assert invariants.counter_agrees(2, ["n"], {"n"}) and invariants.counter_agrees(1, ["n"], set())
    samples = [invariants.Sample(2, 2, frozenset({"a", "b", "hand"})), invariants.Sample(1, 1, frozenset({"a"}))]
    assert invariants.never_above_max(samples, 2, {"hand"}) == []
    assert invariants.never_above_max(samples, 1, set())[0].startswith("running executions peaked at 3")
    assert invariants.alarms_back_to_ok({"A": "OK", "B": "ALARM", "C": "INSUFFICIENT_DATA"}) == ["alarm B still ALARM"]
    assert invariants.repairs_audited("dlq-messages", 2, 0) and not invariants.repairs_audited(None, 0, 0)


def test_alarm_ids_and_a_result_round_trips_through_json() -> None:
    assert alarm_id("pipeops-CounterDrift") == alarm_id("CounterDriftAlarm") == "CounterDrift"
    observation = observed(series={"CounterBelowRunning": (Point(12.0, -2.0),)})
    result = GameDayResult(0.005, True, [observation], [judge(observation, 0.005)], [], 8.0, 30.0, 3, ["note"])
    again = GameDayResult.from_dict(result.to_dict())
    assert again.to_dict() == result.to_dict() and again.passed


def test_a_fault_the_pipeline_absorbs_passes_only_if_no_alarm_fires() -> None:
    absorbed = FaultSpec("status-events-duplicated", "every status event twice", (), None)
    quiet = judge(observed(fault=absorbed, changes=(), notified=()), 0.005)
    assert quiet.passed and quiet.absorbed and quiet.alarm is None
    noisy = judge(observed(fault=absorbed, notified=()), 0.005)
    assert noisy.problems == ("absorbed by design, yet CounterBelowRunning went to ALARM",)


def test_a_burn_window_alone_is_no_false_alarm_but_its_pairs_composite_is() -> None:
    """An earlier fault's failed files stay in a long window; as the window's file count passes its
    guard the window may cross its threshold during an absorbed fault. It notifies no one."""
    from alarms.slo_alarms import window_alarm_ids

    absorbed = FaultSpec("s3-events-duplicated", "every S3 event twice", (), None)
    window = "FilesOnTimeSteadyBurn1d"
    assert window in window_alarm_ids() and "FilesOnTimeSteadyBurn" not in window_alarm_ids()
    crossing = (AlarmChange(window, "OK", "ALARM", 12.0, 2400.0),)
    assert judge(observed(fault=absorbed, changes=crossing, notified=(), silent=tuple(window_alarm_ids())), 0.005).passed
    paired = (*crossing, AlarmChange("FilesOnTimeSteadyBurn", "OK", "ALARM", 12.5, 2500.0))
    noisy = judge(observed(fault=absorbed, changes=paired, notified=(), silent=tuple(window_alarm_ids())), 0.005)
    assert noisy.problems == ("absorbed by design, yet FilesOnTimeSteadyBurn went to ALARM",)


def test_a_faults_timeline_as_text_says_what_happened_and_when() -> None:
    """What a failed short game day prints: every action, audit record and alarm change (with the
    datapoints its reason names), in time order, from the all-OK check; then the metric's points."""
    from pipeops.gameday.model import Action
    from pipeops.gameday.report import timeline_text

    changes = (AlarmChange("CounterBelowRunning", "OK", "ALARM", 13.0, 2600.0, "1 datapoint [-1.0] was less than 0"),)
    text = timeline_text(observed(
        changes=changes,
        actions=(Action("inject count-negative", 11.0), Action("every alarm OK", 15.5)),
        audit=(Action("audit (reconcile): set_count semaphore", 14.0),),
        series={"CounterBelowRunning": (Point(12.0, -1.0), Point(14.5, 0.0))},
        violations=("alarm CounterDrift still ALARM",),
    ))
    assert text.splitlines() == [
        "count-negative (remedy -, 0 applied):",
        "     +1.0 s  inject count-negative",
        "     +3.0 s  CounterBelowRunning OK -> ALARM: 1 datapoint [-1.0] was less than 0",
        "     +4.0 s  audit (reconcile): set_count semaphore",
        "     +5.5 s  every alarm OK",
        "  metric of CounterBelowRunning: +2.0:-1, +4.5:0",
        "  violated: alarm CounterDrift still ALARM",
    ]


SUSTAINED = FaultSpec(
    "slo-sustained-failures", "every file failing", ("FilesOnTimeFastBurn",), "slo-burn",
    quiet_alarms=("FilesOnTimeSlowBurn",), lead_seconds=22_200.0, computed_seconds=518.4,
    timed_from="FilesOnTimeFastBurn5m",
)


def burning(*changes: AlarmChange, **fields: object) -> FaultObservation:
    """A sustained-failure fault injected at 11 s, cleared at 16 s (time scale 0.005)."""
    return observed(fault=SUSTAINED, changes=changes, notified=("FilesOnTimeFastBurn",), cleared_at=16.0, **fields)


FIRST_BAD = AlarmChange("FilesOnTimeFastBurn5m", "OK", "ALARM", 12.0, 2400.0)


def test_a_quiet_alarm_that_fires_while_the_fault_acts_fails_it_by_name() -> None:
    fast = AlarmChange("FilesOnTimeFastBurn", "OK", "ALARM", 14.0, 2800.0)
    assert judge(burning(FIRST_BAD, fast), 0.005).passed
    slow = AlarmChange("FilesOnTimeSlowBurn", "OK", "ALARM", 13.5, 2700.0)
    verdict = judge(burning(FIRST_BAD, slow, fast), 0.005)
    assert verdict.problems == ("FilesOnTimeSlowBurn went to ALARM while the fault acted: it must stay quiet",)
    # Before the injection or after the fault was cleared, it is not the fault's doing.
    before, after = (replace(slow, real_at=10.5), replace(slow, real_at=17.0))
    assert judge(burning(before, FIRST_BAD, fast), 0.005).passed and judge(burning(FIRST_BAD, fast, after), 0.005).passed


def test_the_time_to_fire_is_measured_from_the_first_bad_file_against_the_computed_one() -> None:
    fast = AlarmChange("FilesOnTimeFastBurn", "OK", "ALARM", 14.0, 2800.0)  # 2 s real after the first bad file
    verdict = judge(burning(FIRST_BAD, fast), 0.005)
    assert (verdict.computed_virtual, verdict.timed_virtual) == (518.4, 400.0)
    assert verdict.timed_text == "from the first bad file: computed 8.6 vmin, measured 6.7"
    late = replace(fast, real_at=16.5)  # 900 virtual s: past 1.5x the computed time (a slower file rate) and two evaluations
    assert judge(burning(FIRST_BAD, late), 0.005).problems == (
        "FilesOnTimeFastBurn fired 900 s (virtual) after FilesOnTimeFastBurn5m (the first bad file): later than its "
        "computed 518 s allows",
    )
    within_slack = replace(fast, real_at=15.8)  # 760 s: as measured on the sandbox when failed runs end slower
    assert judge(burning(FIRST_BAD, within_slack), 0.005).passed
    unseen = judge(burning(fast), 0.005)  # the first bad file's window never seen: nothing to time
    assert unseen.passed and unseen.timed_virtual is None and unseen.timed_text.endswith("not measured")


def test_a_fault_spec_with_the_objectives_fields_round_trips_and_an_old_record_gets_defaults() -> None:
    observation = burning(FIRST_BAD, AlarmChange("FilesOnTimeFastBurn", "OK", "ALARM", 14.0, 2800.0))
    result = GameDayResult(0.005, False, [observation], [judge(observation, 0.005)], [], 20.0, 60.0, 3, [])
    again = GameDayResult.from_dict(result.to_dict())
    assert again.to_dict() == result.to_dict() and again.faults[0].fault == SUSTAINED
    old = result.to_dict()
    for name in ("quiet_alarms", "lead_seconds", "traffic_every", "computed_seconds", "timed_from"):
        del old["faults"][0]["fault"][name]
    for name in ("computed_virtual", "timed_virtual"):
        del old["verdicts"][0][name]
    spec = GameDayResult.from_dict(old).faults[0].fault
    assert spec.quiet_alarms == () and spec.computed_seconds is None and spec.timed_from is None


def test_the_objectives_faults_in_the_catalog_name_real_alarms_and_stay_out_of_the_short_form() -> None:
    from alarms.slo_alarms import burn_pairs, window_alarm_ids
    from alarms.slos import DEFAULT_TARGET, POLICY, time_to_fire_seconds
    from pipeops.gameday.catalog import SHORT_FAULTS, chosen

    composites = {pair.name_suffix for pair in burn_pairs()}
    slo = {spec.name: spec for spec in chosen(None, short=False, slo=True)}
    assert set(slo) == {"slo-sustained-failures", "slo-failure-blip", "slo-low-traffic-failures"}
    full = {spec.name for spec in chosen(None, short=False)}
    assert not set(slo) & (set(SHORT_FAULTS) | full)  # their own game day: each needs six virtual hours first
    sustained = slo["slo-sustained-failures"]
    fast = next(alert for alert in POLICY if alert.name == "FastBurn")
    assert sustained.expected_alarms == ("FilesOnTimeFastBurn",) and sustained.quiet_alarms == ("FilesOnTimeSlowBurn",)
    assert sustained.computed_seconds == time_to_fire_seconds(fast, DEFAULT_TARGET, 1.0)
    assert sustained.timed_from in window_alarm_ids()
    for spec in slo.values():
        assert set(spec.quiet_alarms) <= composites and spec.lead_seconds
    for name in ("slo-failure-blip", "slo-low-traffic-failures"):
        assert {"FilesOnTimeFastBurn", "FilesOnTimeSlowBurn"} <= set(slo[name].quiet_alarms)
