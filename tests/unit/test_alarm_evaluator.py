"""CloudWatch alarm semantics, offline: each alarm must fire on one series and not on another.

Series are written like the tables in AWS's "Configuring how CloudWatch alarms treat missing
data" (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarms-and-missing-data.html):
oldest on the left, most recent on the right; ``X`` breaches, ``0`` does not, ``-`` is missing.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alarms.evaluate import (
    AlarmRule,
    AlarmState,
    Comparison,
    Evaluated,
    LowSampleCountPercentile,
    Sample,
    TreatMissingData,
    aggregate,
    evaluate,
    evaluate_samples,
    evaluation_window,
    minimum_samples,
)

OK, ALARM, INSUFFICIENT = AlarmState.OK, AlarmState.ALARM, AlarmState.INSUFFICIENT_DATA
RETAIN = "retain"  # the docs' "Retain current state"
MINUTE = 60
NOW = datetime(2026, 12, 1, 10, 5, 0, tzinfo=UTC)  # a period boundary for 60 s and 300 s
FAST = settings(max_examples=50, deadline=None, database=None)


def rule(
    n: int = 3,
    m: int | None = None,
    treat: TreatMissingData | str = TreatMissingData.MISSING,
    *,
    comparison: Comparison = Comparison.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    statistic: str = "Sum",
    period: int = MINUTE,
    threshold: float = 1.0,
) -> AlarmRule:
    return AlarmRule(
        name="errors",
        statistic=statistic,
        period_seconds=period,
        evaluation_periods=n,
        datapoints_to_alarm=n if m is None else m,
        threshold=threshold,
        comparison=comparison,
        treat_missing_data=TreatMissingData(treat),
    )


def series(pattern: str, *, period: int = MINUTE, now: datetime = NOW) -> dict[datetime, float]:
    """'0 - X' -> datapoints for the last len(pattern) complete periods, newest on the right."""
    marks = pattern.split()
    end = now.replace(second=0, microsecond=0)
    out: dict[datetime, float] = {}
    for age, mark in enumerate(reversed(marks), start=1):
        if mark != "-":
            out[end - timedelta(seconds=period * age)] = {"X": 5.0, "0": 0.0}[mark]
    return out


def state_of(pattern: str, alarm: AlarmRule, previous: AlarmState = INSUFFICIENT) -> AlarmState:
    return evaluate(alarm, series(pattern), NOW, previous).state


# --- The AWS tables, row by row --------------------------------------------------------------

TREATMENTS = ("missing", "ignore", "breaching", "notBreaching")

THREE_OF_THREE = [  # (data points, MISSING, IGNORE, BREACHING, NOT BREACHING)
    ("0 - X - X", OK, OK, OK, OK),
    ("0 - - - -", OK, OK, OK, OK),
    ("- - - - -", INSUFFICIENT, RETAIN, ALARM, OK),
    ("0 X X - X", ALARM, ALARM, ALARM, ALARM),
    ("- - X - -", ALARM, RETAIN, ALARM, OK),  # premature alarm state
    ("- - - - X", INSUFFICIENT, RETAIN, ALARM, OK),  # earlier edition of the table
]

TWO_OF_THREE = [
    ("0 - X - X", ALARM, ALARM, ALARM, ALARM),
    ("0 0 X 0 X", ALARM, ALARM, ALARM, ALARM),
    ("0 - X - -", OK, OK, ALARM, OK),
    ("- - - - 0", OK, OK, ALARM, OK),
    ("- - - X -", ALARM, RETAIN, ALARM, OK),  # premature alarm state
    ("- - - - X", INSUFFICIENT, RETAIN, ALARM, OK),  # earlier edition of the table
]


def _table_cases(rows: list[tuple], m: int) -> list:
    return [
        pytest.param(row[0], m, treat, expected, id=f"{m}of3 {row[0]} {treat}")
        for row in rows
        for treat, expected in zip(TREATMENTS, row[1:], strict=True)
    ]


@pytest.mark.parametrize(
    ("pattern", "m", "treat", "expected"),
    _table_cases(THREE_OF_THREE, 3) + _table_cases(TWO_OF_THREE, 2),
)
def test_the_aws_missing_data_tables_are_reproduced_exactly(
    pattern: str, m: int, treat: str, expected: AlarmState | str
) -> None:
    alarm = rule(3, m, treat)
    for previous in (OK, ALARM, INSUFFICIENT):
        outcome = state_of(pattern, alarm, previous)
        assert outcome == (previous if expected == RETAIN else expected), (pattern, treat, previous)


# --- M out of N ------------------------------------------------------------------------------


def test_two_of_three_breaching_with_one_missing_alarms() -> None:
    for treat in TREATMENTS:
        assert state_of("X - X", rule(3, 2, treat)) is ALARM, treat


def test_two_of_three_with_one_breaching_one_ok_and_one_missing_stays_ok_unless_missing_breaches() -> None:
    assert state_of("X 0 -", rule(3, 2, "missing")) is OK
    assert state_of("X 0 -", rule(3, 2, "ignore"), ALARM) is OK
    assert state_of("X 0 -", rule(3, 2, "notBreaching")) is OK
    assert state_of("X 0 -", rule(3, 2, "breaching")) is ALARM


def test_breaching_datapoints_need_not_be_consecutive() -> None:
    assert state_of("X 0 X", rule(3, 2)) is ALARM
    assert state_of("0 X 0", rule(3, 2)) is OK


def test_one_breach_short_of_m_is_ok() -> None:
    assert state_of("X X 0 X", rule(4, 3)) is ALARM
    assert state_of("X 0 0 X", rule(4, 3)) is OK


def test_only_the_last_n_periods_count_when_they_are_all_present() -> None:
    # Two old breaches sit in the evaluation range but outside the last three datapoints.
    assert state_of("X X 0 0 0", rule(3, 1)) is OK


def test_real_datapoints_from_further_back_replace_missing_ones() -> None:
    # Three real datapoints exist in the range, so TreatMissingData is never consulted.
    verdict = evaluate(rule(3, 3, "notBreaching"), series("X X - X -"), NOW)
    assert verdict.state is ALARM
    assert [point.value for point in verdict.datapoints] == [5.0, 5.0, 5.0]


def test_breaching_fills_only_the_shortfall_not_every_gap() -> None:
    verdict = evaluate(rule(3, 3, "breaching"), series("0 - - - -"), NOW)
    assert verdict.state is OK
    assert [point.breaching for point in verdict.datapoints] == [True, True, False]


def test_datapoints_older_than_the_evaluation_range_do_not_count() -> None:
    # Range is N + 2 = 3 periods for N = 1: a breach four periods ago is out of sight.
    assert state_of("X - - -", rule(1, 1, "missing")) is INSUFFICIENT
    assert state_of("X - -", rule(1, 1, "missing")) is ALARM  # one real datapoint is all N = 1 needs


def test_a_wider_range_can_be_asked_for() -> None:
    alarm = rule(1, 1, "breaching")
    assert evaluate(alarm, series("0 - - -"), NOW).state is ALARM
    assert evaluate(alarm, series("0 - - -"), NOW, range_periods=4).state is OK


# --- Every TreatMissingData value over all-missing, some-missing and no-missing series ----------

TREATMENT_CASES = [
    # (series, N, M, missing, ignore, breaching, notBreaching) -- previous state is OK
    ("- - - - -", 3, 3, INSUFFICIENT, OK, ALARM, OK),
    ("- - 0 0 -", 3, 3, OK, OK, OK, OK),
    ("- - X X -", 3, 3, ALARM, OK, ALARM, OK),  # premature: oldest breach 3 of 3 old
    ("- - - X X", 3, 3, INSUFFICIENT, OK, ALARM, OK),  # too recent to confirm
    ("- - X - X", 3, 2, ALARM, ALARM, ALARM, ALARM),
    ("0 0 0 0 0", 3, 3, OK, OK, OK, OK),
    ("X X X X X", 3, 3, ALARM, ALARM, ALARM, ALARM),
]


@pytest.mark.parametrize(
    ("pattern", "n", "m", "missing", "ignore", "breaching", "not_breaching"), TREATMENT_CASES
)
def test_each_treatment_of_missing_data(
    pattern: str,
    n: int,
    m: int,
    missing: AlarmState,
    ignore: AlarmState,
    breaching: AlarmState,
    not_breaching: AlarmState,
) -> None:
    expected = dict(zip(TREATMENTS, (missing, ignore, breaching, not_breaching), strict=True))
    for treat in TREATMENTS:
        assert state_of(pattern, rule(n, m, treat), OK) is expected[treat], treat


def test_an_alarm_starts_in_insufficient_data_and_stays_there_without_data() -> None:
    verdict = evaluate(rule(), {}, NOW)
    assert verdict.state is INSUFFICIENT
    assert not verdict.changed
    assert verdict.reason == "Insufficient Data: no datapoints were received for the last 5 periods."


def test_ignore_keeps_the_alarm_firing_when_the_metric_stops() -> None:
    alarm = rule(3, 3, "ignore")
    assert state_of("- - - - -", alarm, ALARM) is ALARM
    assert state_of("- - - - -", alarm, OK) is OK


def test_ignore_still_moves_on_real_data() -> None:
    alarm = rule(3, 3, "ignore")
    assert state_of("X X X", alarm, OK) is ALARM
    assert state_of("0 0 0", alarm, ALARM) is OK


def test_not_breaching_resolves_an_alarm_once_the_metric_goes_quiet() -> None:
    assert state_of("X - - - -", rule(1, 1, "notBreaching"), ALARM) is OK


# --- Comparisons -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("comparison", "value", "breaches"),
    [
        (Comparison.GREATER_THAN_OR_EQUAL_TO_THRESHOLD, 1.0, True),
        (Comparison.GREATER_THAN_OR_EQUAL_TO_THRESHOLD, 0.9, False),
        (Comparison.GREATER_THAN_THRESHOLD, 1.1, True),
        (Comparison.GREATER_THAN_THRESHOLD, 1.0, False),
        (Comparison.LESS_THAN_THRESHOLD, 0.9, True),
        (Comparison.LESS_THAN_THRESHOLD, 1.0, False),
        (Comparison.LESS_THAN_OR_EQUAL_TO_THRESHOLD, 1.0, True),
        (Comparison.LESS_THAN_OR_EQUAL_TO_THRESHOLD, 1.1, False),
    ],
)
def test_every_comparison_alarms_only_on_its_side_of_the_threshold(
    comparison: Comparison, value: float, breaches: bool
) -> None:
    alarm = rule(1, 1, comparison=comparison, threshold=1.0)
    verdict = evaluate(alarm, {NOW - timedelta(minutes=1): value}, NOW)
    assert verdict.state is (ALARM if breaches else OK)
    assert verdict.datapoints == (Evaluated(NOW - timedelta(minutes=1), value, breaches),)


def test_comparison_values_are_the_cloudwatch_strings() -> None:
    assert {c.value for c in Comparison} == {
        "GreaterThanOrEqualToThreshold",
        "GreaterThanThreshold",
        "LessThanThreshold",
        "LessThanOrEqualToThreshold",
    }
    assert {t.value for t in TreatMissingData} == {"missing", "ignore", "breaching", "notBreaching"}
    assert {s.value for s in AlarmState} == {"OK", "ALARM", "INSUFFICIENT_DATA"}


# --- Statistics and aggregation --------------------------------------------------------------

HOUR = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
ONE_TO_HUNDRED = [Sample(HOUR + timedelta(seconds=i % 60), float(i)) for i in range(1, 101)]


@pytest.mark.parametrize(
    ("statistic", "expected"),
    [
        ("Sum", 5050.0),
        ("Average", 50.5),
        ("Minimum", 1.0),
        ("Maximum", 100.0),
        ("SampleCount", 100.0),
        ("p50", 50.0),
        ("p90", 90.0),
        ("p99", 99.0),
        ("p99.9", 100.0),
        ("p0", 1.0),
        ("p100", 100.0),
    ],
)
def test_each_statistic_of_one_period(statistic: str, expected: float) -> None:
    assert aggregate(ONE_TO_HUNDRED, statistic, MINUTE, HOUR, HOUR + timedelta(minutes=1)) == {HOUR: expected}


def test_percentiles_are_nearest_rank_over_counted_samples() -> None:
    # 990 fast requests and 10 slow ones: p99 is still fast, p99.9 is slow.
    samples = [Sample(HOUR, 0.1, count=990), Sample(HOUR, 9.0, count=10)]
    window = (HOUR, HOUR + timedelta(minutes=1))
    assert aggregate(samples, "p99", MINUTE, *window) == {HOUR: 0.1}
    assert aggregate(samples, "p99.9", MINUTE, *window) == {HOUR: 9.0}
    assert aggregate(samples, "Average", MINUTE, *window) == {HOUR: pytest.approx((99 + 90) / 1000)}


def test_periods_align_to_the_clock_not_to_the_query_start() -> None:
    start = datetime(2026, 12, 1, 10, 2, 30, tzinfo=UTC)
    samples = [
        Sample(datetime(2026, 12, 1, 10, 4, 59, tzinfo=UTC), 1.0),
        Sample(datetime(2026, 12, 1, 10, 5, tzinfo=UTC), 2.0),
    ]
    assert aggregate(samples, "Sum", 300, start, start + timedelta(hours=1)) == {
        datetime(2026, 12, 1, 10, 0, tzinfo=UTC): 1.0,
        datetime(2026, 12, 1, 10, 5, tzinfo=UTC): 2.0,
    }


def test_periods_without_samples_are_absent_and_bounds_are_half_open() -> None:
    samples = [
        Sample(HOUR, 1.0),
        Sample(HOUR + timedelta(minutes=2), 3.0),
        Sample(HOUR + timedelta(minutes=3), 7.0),
    ]
    assert aggregate(samples, "Sum", MINUTE, HOUR, HOUR + timedelta(minutes=3)) == {
        HOUR: 1.0,
        HOUR + timedelta(minutes=2): 3.0,
    }


def test_high_resolution_periods_bucket_by_ten_seconds() -> None:
    samples = [Sample(HOUR + timedelta(seconds=s), 1.0) for s in (0, 9, 10, 35)]
    assert aggregate(samples, "SampleCount", 10, HOUR, HOUR + timedelta(minutes=1)) == {
        HOUR: 2.0,
        HOUR + timedelta(seconds=10): 1.0,
        HOUR + timedelta(seconds=30): 1.0,
    }


@FAST
@given(
    values=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=20),
    counts=st.lists(st.integers(1, 5), min_size=20, max_size=20),
    statistic=st.sampled_from(["Sum", "Average", "Minimum", "Maximum", "SampleCount", "p10", "p50", "p99"]),
)
def test_a_counted_sample_is_that_many_equal_samples(
    values: list[float], counts: list[int], statistic: str
) -> None:
    counted = [Sample(HOUR, v, count=c) for v, c in zip(values, counts, strict=False)]
    spelled = [Sample(HOUR, v) for v, c in zip(values, counts, strict=False) for _ in range(c)]
    window = (HOUR, HOUR + timedelta(minutes=1))
    assert aggregate(counted, statistic, MINUTE, *window) == pytest.approx(
        aggregate(spelled, statistic, MINUTE, *window)
    )


@FAST
@given(values=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=30))
def test_percentiles_are_ordered_and_within_the_extremes(values: list[float]) -> None:
    samples = [Sample(HOUR, v) for v in values]
    window = (HOUR, HOUR + timedelta(minutes=1))
    stats = [
        aggregate(samples, s, MINUTE, *window)[HOUR]
        for s in ("Minimum", "p10", "p50", "p90", "p99", "Maximum")
    ]
    assert stats == sorted(stats)


# --- Complete periods and the evaluation range -----------------------------------------------


def test_the_period_in_progress_is_not_evaluated() -> None:
    alarm = rule(1, 1, "notBreaching")
    current = {NOW: 5.0}  # the period [10:05, 10:06) has only begun
    assert evaluate(alarm, current, NOW + timedelta(seconds=59)).state is OK
    assert evaluate(alarm, current, NOW + timedelta(seconds=60)).state is ALARM  # complete: end <= now


def test_the_evaluation_window_slides_with_the_evaluation_minute() -> None:
    """A SlidingWindow: the newest period ends at the evaluation's minute, not at a clock period."""
    start, end = evaluation_window(rule(3, period=300), NOW + timedelta(minutes=4, seconds=20))
    assert (start, end) == (NOW - timedelta(minutes=21), NOW + timedelta(minutes=4))
    assert evaluation_window(rule(3), NOW + timedelta(seconds=20)) == (NOW - timedelta(minutes=5), NOW)
    assert evaluation_window(rule(1, period=30), NOW + timedelta(seconds=40))[1] == NOW + timedelta(seconds=30)


def test_datapoint_keys_anywhere_inside_a_period_count_for_that_period() -> None:
    verdict = evaluate(rule(1, 1), {NOW - timedelta(seconds=30): 5.0}, NOW)
    assert verdict.state is ALARM
    assert verdict.datapoints[0].timestamp == NOW - timedelta(minutes=1)


def test_two_datapoints_for_one_period_are_refused() -> None:
    with pytest.raises(ValueError, match="two datapoints fall in the period"):
        evaluate(rule(), {NOW - timedelta(seconds=30): 1.0, NOW - timedelta(seconds=50): 2.0}, NOW)


def test_naive_datetimes_are_taken_as_utc() -> None:
    naive = {(NOW - timedelta(minutes=1)).replace(tzinfo=None): 5.0}
    assert evaluate(rule(1, 1), naive, NOW.replace(tzinfo=None)).state is ALARM


# --- The verdict -----------------------------------------------------------------------------


def test_the_reason_reads_like_cloudwatch() -> None:
    verdict = evaluate(rule(3, 3), series("X X X"), NOW, OK)
    assert verdict.reason == (
        "Threshold Crossed: 3 out of the last 3 datapoints [5.0 (01/12/26 10:04:00), "
        "5.0 (01/12/26 10:03:00), 5.0 (01/12/26 10:02:00)] were greater than or equal to the threshold (1.0)."
    )
    assert verdict.changed


def test_the_reason_names_the_non_breaching_datapoints_when_ok() -> None:
    verdict = evaluate(rule(1, 1, comparison=Comparison.GREATER_THAN_THRESHOLD), series("0"), NOW, ALARM)
    assert (
        verdict.reason
        == "Threshold Crossed: 1 datapoint [0.0 (01/12/26 10:04:00)] was not greater than the threshold (1.0)."
    )


def test_the_reason_says_how_missing_datapoints_were_treated() -> None:
    assert evaluate(rule(2, 2, "breaching"), {}, NOW).reason == (
        "Threshold Crossed: no datapoints were received for 2 periods and 2 missing datapoints were treated as [Breaching]."
    )
    assert evaluate(rule(3, 2, "breaching"), series("X - -"), NOW).reason.endswith(
        "was greater than or equal to the threshold (1.0) and 2 missing datapoints were treated as [Breaching]."
    )


def test_the_verdict_lists_the_deciding_datapoints_newest_first() -> None:
    verdict = evaluate(rule(3, 2, "missing"), series("0 - X - -"), NOW)
    minute = timedelta(minutes=1)
    assert verdict.datapoints == (
        Evaluated(NOW - minute, None, None),
        Evaluated(NOW - 3 * minute, 5.0, True),
        Evaluated(NOW - 5 * minute, 0.0, False),
    )


def test_changed_compares_with_the_previous_state() -> None:
    assert evaluate(rule(1, 1), series("X"), NOW, ALARM).changed is False
    assert evaluate(rule(1, 1), series("X"), NOW, OK).changed is True


# --- Percentiles with low sample counts ------------------------------------------------------


def test_minimum_samples_follows_the_documented_formula() -> None:
    assert [minimum_samples(s) for s in ("p99", "p90", "p50", "p99.9", "p10", "p25", "Sum", "p100")] == [
        1000,
        100,
        20,
        10000,
        100,
        40,
        0,
        0,
    ]


def test_a_thin_percentile_period_keeps_the_state_when_low_samples_are_ignored() -> None:
    alarm = AlarmRule(
        name="latency",
        statistic="p99",
        period_seconds=MINUTE,
        evaluation_periods=1,
        datapoints_to_alarm=1,
        threshold=1.0,
        comparison=Comparison.GREATER_THAN_THRESHOLD,
        evaluate_low_sample_count_percentile=LowSampleCountPercentile.IGNORE,
    )
    slow = [Sample(NOW - timedelta(seconds=30), 5.0, count=10)]
    verdict = evaluate_samples(alarm, slow, NOW, OK)
    assert verdict.state is OK and not verdict.changed
    assert "fewer than 1000 samples" in verdict.reason
    plenty = [Sample(NOW - timedelta(seconds=30), 5.0, count=1000)]
    assert evaluate_samples(alarm, plenty, NOW, OK).state is ALARM


def test_a_thin_percentile_period_is_evaluated_by_default() -> None:
    alarm = rule(1, 1, statistic="p99", comparison=Comparison.GREATER_THAN_THRESHOLD)
    assert evaluate_samples(alarm, [Sample(NOW - timedelta(seconds=30), 5.0)], NOW, OK).state is ALARM


# --- evaluate_samples end to end -------------------------------------------------------------


def test_an_error_burst_fires_the_alarm_and_a_trickle_does_not() -> None:
    alarm = rule(3, 2, "notBreaching", statistic="Sum", threshold=5.0)
    burst = [Sample(NOW - timedelta(minutes=k) + timedelta(seconds=10), 1.0, count=6) for k in (1, 3)]
    trickle = [Sample(NOW - timedelta(minutes=k) + timedelta(seconds=10), 1.0) for k in (1, 2, 3)]
    assert evaluate_samples(alarm, burst, NOW).state is ALARM
    assert evaluate_samples(alarm, trickle, NOW).state is OK


def test_samples_in_the_current_period_do_not_fire_yet() -> None:
    alarm = rule(1, 1, "notBreaching", statistic="Maximum", threshold=5.0)
    spike = [Sample(NOW + timedelta(seconds=5), 9.0)]
    assert evaluate_samples(alarm, spike, NOW + timedelta(seconds=30)).state is OK
    assert evaluate_samples(alarm, spike, NOW + timedelta(minutes=1)).state is ALARM


# --- Building rules --------------------------------------------------------------------------


def test_from_put_metric_alarm_reads_a_standard_statistic_and_applies_the_defaults() -> None:
    built = AlarmRule.from_put_metric_alarm(
        {
            "AlarmName": "pipeline-errors",
            "MetricName": "Errors",
            "Namespace": "AWS/Lambda",
            "Statistic": "Sum",
            "Period": 300,
            "EvaluationPeriods": 3,
            "Threshold": 1,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
        }
    )
    assert built == AlarmRule(
        name="pipeline-errors",
        statistic="Sum",
        period_seconds=300,
        evaluation_periods=3,
        datapoints_to_alarm=3,
        threshold=1.0,
        comparison=Comparison.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treat_missing_data=TreatMissingData.MISSING,
    )


def test_from_put_metric_alarm_reads_a_describe_alarms_entry_with_a_percentile() -> None:
    built = AlarmRule.from_put_metric_alarm(
        {
            "AlarmName": "latency",
            "AlarmArn": "arn:aws:cloudwatch:us-east-1:123456789012:alarm:latency",
            "StateValue": "OK",
            "ExtendedStatistic": "p99",
            "Period": 60,
            "EvaluationPeriods": 5,
            "DatapointsToAlarm": 2,
            "Threshold": 250.0,
            "ComparisonOperator": "GreaterThanThreshold",
            "TreatMissingData": "notBreaching",
            "EvaluateLowSampleCountPercentile": "ignore",
            "Dimensions": [],
        }
    )
    assert (built.statistic, built.evaluation_periods, built.datapoints_to_alarm) == ("p99", 5, 2)
    assert built.treat_missing_data is TreatMissingData.NOT_BREACHING
    assert built.evaluate_low_sample_count_percentile is LowSampleCountPercentile.IGNORE


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"Statistic": None}, "Statistic or ExtendedStatistic is required"),
        ({"ExtendedStatistic": "p99"}, "not both"),
        ({"Statistic": None, "Metrics": [{"Id": "m1"}]}, "metric-math"),
        ({"ComparisonOperator": "LessThanLowerOrGreaterThanUpperThreshold"}, "anomaly-detection"),
        ({"Period": None}, "missing Period"),
        ({"TreatMissingData": "sometimes"}, "TreatMissingData 'sometimes' is not one of"),
    ],
)
def test_from_put_metric_alarm_refuses_what_it_cannot_evaluate(change: dict, message: str) -> None:
    props = {
        "AlarmName": "a",
        "Statistic": "Sum",
        "Period": 60,
        "EvaluationPeriods": 1,
        "Threshold": 1.0,
        "ComparisonOperator": "GreaterThanThreshold",
    }
    with pytest.raises(ValueError, match=message):
        AlarmRule.from_put_metric_alarm({**props, **change})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"datapoints_to_alarm": 4},
            r"datapoints_to_alarm \(4\) must be between 1 and evaluation_periods \(3\)",
        ),
        ({"evaluation_periods": 0, "datapoints_to_alarm": 0}, "evaluation_periods must be >= 1"),
        ({"period_seconds": 45}, "period 45s is not valid"),
        ({"period_seconds": 90}, "period 90s is not valid"),
        ({"statistic": "Median"}, "unknown statistic 'Median'"),
        ({"statistic": "p101"}, "unknown statistic 'p101'"),
        ({"statistic": "tm90"}, "unknown statistic 'tm90'"),
        ({"comparison": "Above"}, "comparison 'Above' is not one of"),
        ({"threshold": float("nan")}, "threshold must be a finite number"),
    ],
)
def test_invalid_rules_are_refused_with_a_clear_message(overrides: dict, message: str) -> None:
    props = {
        "name": "a",
        "statistic": "Sum",
        "period_seconds": 60,
        "evaluation_periods": 3,
        "datapoints_to_alarm": 3,
        "threshold": 1.0,
        "comparison": Comparison.GREATER_THAN_THRESHOLD,
    }
    with pytest.raises(ValueError, match=message):
        AlarmRule(**{**props, **overrides})


@pytest.mark.parametrize("period", [10, 30, 60, 300, 3600, 86400])
def test_valid_periods_are_accepted(period: int) -> None:
    assert rule(period=period).period_seconds == period


def test_a_sample_needs_a_positive_count() -> None:
    with pytest.raises(ValueError, match="positive"):
        Sample(HOUR, 1.0, count=0)


# --- Properties ------------------------------------------------------------------------------

shapes = st.integers(1, 5).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n)))
treatments = st.sampled_from(list(TreatMissingData))
states = st.sampled_from(list(AlarmState))
comparisons = st.sampled_from(list(Comparison))


def patterns(length: int) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(["0", "X", "-"]), min_size=length, max_size=length).map(" ".join)


@FAST
@given(shape=shapes, previous=states)
def test_not_breaching_never_alarms_on_an_empty_series(shape: tuple[int, int], previous: AlarmState) -> None:
    n, m = shape
    assert evaluate(rule(n, m, "notBreaching"), {}, NOW, previous).state is OK


@FAST
@given(shape=shapes, treat=treatments, comparison=comparisons, previous=states)
def test_a_series_of_all_breaching_values_always_alarms(
    shape: tuple[int, int], treat: TreatMissingData, comparison: Comparison, previous: AlarmState
) -> None:
    n, m = shape
    breaching = 5.0 if comparison.breaches(5.0, 1.0) else -5.0
    values = {NOW - timedelta(minutes=k): breaching for k in range(1, n + 3)}
    assert evaluate(rule(n, m, treat, comparison=comparison), values, NOW, previous).state is ALARM


@FAST
@given(shape=shapes, treat=treatments, previous=states)
def test_a_full_series_of_quiet_values_is_always_ok(
    shape: tuple[int, int], treat: TreatMissingData, previous: AlarmState
) -> None:
    n, m = shape
    assert state_of(" ".join(["0"] * (n + 2)), rule(n, m, treat), previous) is OK


@FAST
@given(data=st.data(), shape=shapes, treat=treatments, previous=states)
def test_verdicts_rest_on_n_datapoints_newest_first_inside_the_range(
    data: st.DataObject, shape: tuple[int, int], treat: TreatMissingData, previous: AlarmState
) -> None:
    n, m = shape
    alarm = rule(n, m, treat)
    verdict = evaluate(alarm, series(data.draw(patterns(n + 2))), NOW, previous)
    stamps = [point.timestamp for point in verdict.datapoints]
    assert len(stamps) == n
    assert stamps == sorted(stamps, reverse=True) and len(set(stamps)) == n
    start, end = evaluation_window(alarm, NOW)
    assert all(start <= stamp < end for stamp in stamps)
    assert verdict.changed == (verdict.state is not previous)


@FAST
@given(data=st.data(), shape=shapes, treat=treatments, previous=states)
def test_only_missing_and_ignore_can_leave_ok_and_alarm(
    data: st.DataObject, shape: tuple[int, int], treat: TreatMissingData, previous: AlarmState
) -> None:
    n, m = shape
    state = state_of(data.draw(patterns(n + 2)), rule(n, m, treat), previous)
    if treat in (TreatMissingData.BREACHING, TreatMissingData.NOT_BREACHING):
        assert state is not INSUFFICIENT
    if treat is TreatMissingData.IGNORE and state is INSUFFICIENT:
        assert previous is INSUFFICIENT


@FAST
@given(data=st.data(), shape=shapes, treat=treatments, previous=states)
def test_making_a_datapoint_breach_never_ends_an_alarm(
    data: st.DataObject, shape: tuple[int, int], treat: TreatMissingData, previous: AlarmState
) -> None:
    n, m = shape
    marks = data.draw(patterns(n + 2)).split()
    quiet = [i for i, mark in enumerate(marks) if mark == "0"]
    alarm = rule(n, m, treat)
    if state_of(" ".join(marks), alarm, previous) is not ALARM or not quiet:
        return
    marks[data.draw(st.sampled_from(quiet))] = "X"
    assert state_of(" ".join(marks), alarm, previous) is ALARM


@FAST
@given(data=st.data(), shape=shapes, treat=treatments, previous=states)
def test_history_before_the_evaluation_range_changes_nothing(
    data: st.DataObject, shape: tuple[int, int], treat: TreatMissingData, previous: AlarmState
) -> None:
    n, m = shape
    recent = data.draw(patterns(n + 2))
    older = data.draw(patterns(3))
    alarm = rule(n, m, treat)
    assert state_of(f"{older} {recent}", alarm, previous) == state_of(recent, alarm, previous)


# --- FILL(m, value) metric math -------------------------------------------------------------

FILLED_THROTTLES = {
    "AlarmName": "throttles",
    "Metrics": [
        {
            "Id": "m",
            "MetricStat": {
                "Metric": {"Namespace": "AWS/DynamoDB", "MetricName": "WriteThrottleEvents", "Dimensions": [{"Name": "TableName", "Value": "t"}]},
                "Period": 60,
                "Stat": "Sum",
            },
            "ReturnData": False,
        },
        {"Id": "filled", "Expression": "FILL(m, 0)", "ReturnData": True},
    ],
    "EvaluationPeriods": 3,
    "Threshold": 0,
    "ComparisonOperator": "GreaterThanThreshold",
    "TreatMissingData": "notBreaching",
}


def test_a_fill_alarm_reads_its_metric_and_fill_value() -> None:
    from alarms.evaluate import watched_metric

    built = AlarmRule.from_put_metric_alarm(FILLED_THROTTLES)
    assert (built.statistic, built.period_seconds, built.fill) == ("Sum", 60, 0.0)
    assert watched_metric(FILLED_THROTTLES) == {
        "Namespace": "AWS/DynamoDB",
        "MetricName": "WriteThrottleEvents",
        "Dimensions": [{"Name": "TableName", "Value": "t"}],
    }


@pytest.mark.parametrize("expression", ["m * 2", "FILL(m, REPEAT)", "FILL(m, 0) + 1"])
def test_other_metric_math_is_read_as_an_expression(expression: str) -> None:
    props = {**FILLED_THROTTLES, "Metrics": [FILLED_THROTTLES["Metrics"][0], {"Id": "e", "Expression": expression, "ReturnData": True}]}
    built = AlarmRule.from_put_metric_alarm(props)
    assert built.fill is None and built.math is not None and built.math.returned == "e"


@pytest.mark.parametrize(
    ("expression", "message"),
    [("FILL(other, 0)", "unknown id 'other'"), ("RATE(m)", "unsupported function 'RATE'")],
)
def test_metric_math_outside_the_grammar_is_refused_naming_the_alarm(expression: str, message: str) -> None:
    props = {**FILLED_THROTTLES, "Metrics": [FILLED_THROTTLES["Metrics"][0], {"Id": "e", "Expression": expression, "ReturnData": True}]}
    with pytest.raises(ValueError, match=f"alarm 'throttles'.*{re.escape(message)}"):
        AlarmRule.from_put_metric_alarm(props)


def test_fill_gives_every_period_of_the_range_a_value_once_the_range_holds_one() -> None:
    filled = AlarmRule.from_put_metric_alarm(FILLED_THROTTLES | {"TreatMissingData": "ignore"})
    bare = AlarmRule.from_put_metric_alarm(
        {**FILLED_THROTTLES, "Metrics": None, "Statistic": "Sum", "Period": 60, "TreatMissingData": "ignore"}
    )
    after_an_episode = series("X X X - -")  # throttles published only while they happen
    assert evaluate(bare, after_an_episode, NOW, ALARM).state is ALARM  # latched
    verdict = evaluate(filled, after_an_episode, NOW, ALARM)
    assert verdict.state is OK
    assert [point.value for point in verdict.datapoints] == [0.0, 0.0, 5.0]
    assert evaluate(filled, series("- - - - -"), NOW, ALARM).state is ALARM  # nothing to fill: ignore keeps it
    assert evaluate(filled, series("- - X X X"), NOW, INSUFFICIENT).state is ALARM


def test_reasons_write_each_period_with_the_stamp_given() -> None:
    verdict = evaluate(rule(3), series("X X X"), NOW, stamp=lambda moment: f"<{moment:%H:%M}>")
    assert "5.0 (<10:04>), 5.0 (<10:03>), 5.0 (<10:02>)" in verdict.reason
    assert "(01/12/26 10:04:00)" in evaluate(rule(3), series("X X X"), NOW).reason
