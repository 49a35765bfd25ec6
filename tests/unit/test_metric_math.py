"""Metric math as CloudWatch evaluates it (alarms.metric_math), and metric-math alarms judged
over series (alarms.evaluate): the burn-rate alarm shape fires on sustained failures and stays
quiet on a blip and on a quiet hour."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alarms.evaluate import AlarmRule, AlarmState, Sample, evaluate_math, evaluate_math_samples, replay
from alarms.metric_math import (
    Binary,
    Call,
    MetricMathError,
    Number,
    Ref,
    SeriesList,
    Unary,
    evaluate_expression,
    format_expression,
    parse,
    parse_queries,
)

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
STAMPS = [T0 + timedelta(minutes=k) for k in range(4)]


def at(*values: float | None) -> dict[datetime, float]:
    """A series over STAMPS; None: no datapoint in that period."""
    return {t: float(v) for t, v in zip(STAMPS, values, strict=False) if v is not None}


def value_of(expression: str, **series: dict[datetime, float]) -> object:
    return evaluate_expression(parse(expression), series, STAMPS)


# --------------------------------------------------------------------------- parsing


def test_precedence_and_associativity_follow_arithmetic() -> None:
    assert parse("a + b * 2") == Binary("+", Ref("a"), Binary("*", Ref("b"), Number(2.0)))
    assert parse("a - b - c") == Binary("-", Binary("-", Ref("a"), Ref("b")), Ref("c"))
    assert parse("-a * 2") == Binary("*", Unary("-", Ref("a")), Number(2.0))
    assert parse("a > 1 AND b < 2 OR NOT c") == Binary(
        "OR",
        Binary("AND", Binary(">", Ref("a"), Number(1.0)), Binary("<", Ref("b"), Number(2.0))),
        Unary("NOT", Ref("c")),
    )
    assert parse("a && b || !c") == parse("a AND b OR NOT c")
    assert parse("IF(total >= 10, bad / total, 0)") == Call(
        "IF",
        (Binary(">=", Ref("total"), Number(10.0)), Binary("/", Ref("bad"), Ref("total")), Number(0.0)),
    )
    assert parse("SUM([a, b])") == Call("SUM", (SeriesList((Ref("a"), Ref("b"))),))


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("", "empty"),
        ("a +", "unexpected end"),
        ("(a + b", "expected ')'"),
        ("a b", "unexpected 'b'"),
        ("RATE(a)", "unsupported function 'RATE'"),
        ("ANOMALY_DETECTION_BAND(a, 2)", "unsupported function"),
        ("a + Foo", "unknown name 'Foo'"),
        ("FILL(a)", "FILL takes 2 arguments"),
        ("IF(a)", "IF takes 2 or 3 arguments"),
        ("SUM(REPEAT)", "REPEAT/LINEAR only"),
        ("a % 2", "unexpected '%'"),
        ('SEARCH("x", "Sum", 60)', "unexpected"),
    ],
)
def test_what_is_outside_the_grammar_is_refused_with_a_reason(expression: str, message: str) -> None:
    with pytest.raises(MetricMathError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse(expression)


_ids = st.sampled_from(["a", "b", "good", "late_1"]).map(Ref)
_numbers = st.floats(min_value=0, max_value=1e9, allow_nan=False).map(Number)
_trees = st.recursive(
    _ids | _numbers,
    lambda inner: st.one_of(
        st.builds(Unary, st.sampled_from(["-", "NOT"]), inner),
        st.builds(
            Binary,
            st.sampled_from(["+", "-", "*", "/", ">", ">=", "<", "<=", "==", "!=", "AND", "OR"]),
            inner,
            inner,
        ),
        st.builds(lambda a, b: Call("FILL", (a, b)), inner, _numbers),
        st.builds(lambda c, a, b: Call("IF", (c, a, b)), inner, inner, inner),
        st.builds(lambda a, b: Call("MAX", (SeriesList((a, b)),)), _ids, _ids),
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(_trees)
def test_printing_and_parsing_a_tree_round_trips(tree: object) -> None:
    assert parse(format_expression(tree)) == tree  # type: ignore[arg-type]


# --------------------------------------------------------------------------- series arithmetic


def test_series_op_scalar_applies_to_each_datapoint_and_series_op_series_pairs_timestamps() -> None:
    assert value_of("a * 2 + 1", a=at(1, 2, None, 4)) == at(3, 5, None, 9)
    assert value_of("10 - a", a=at(1, None)) == at(9)
    assert value_of("a + b", a=at(1, 2, 3, None), b=at(10, None, 30, 40)) == at(11, None, 33)  # mis-aligned
    assert value_of("-a", a=at(1, -2)) == at(-1, 2)
    assert value_of("2 * 3 + 1") == 7.0


def test_division_by_zero_drops_the_datapoint() -> None:
    assert value_of("a / b", a=at(1, 2, 0, 4), b=at(2, 0, 0, 8)) == at(0.5, None, None, 0.5)
    assert value_of("a / 0", a=at(1, 2)) == {}
    with pytest.raises(MetricMathError, match="not a number"):
        value_of("1 / 0")


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        (">", (0, 0, 1)),
        (">=", (0, 1, 1)),
        ("<", (1, 0, 0)),
        ("<=", (1, 1, 0)),
        ("==", (0, 1, 0)),
        ("!=", (1, 0, 1)),
    ],
)
def test_comparisons_give_one_or_zero(op: str, expected: tuple[int, ...]) -> None:
    assert value_of(f"a {op} 2", a=at(1, 2, 3)) == at(*expected)


def test_logical_operators_treat_non_zero_as_true() -> None:
    a, b = at(0, 0, 3, 5), at(0, 2, 0, -1)
    assert value_of("a AND b", a=a, b=b) == at(0, 0, 0, 1)
    assert value_of("a OR b", a=a, b=b) == at(0, 1, 1, 1)
    assert value_of("NOT a", a=a) == at(1, 1, 0, 0)


def test_fill_gives_every_period_a_value_and_leaves_an_empty_series_empty() -> None:
    assert value_of("FILL(a, 0)", a=at(None, 2, None, None)) == at(0, 2, 0, 0)
    assert value_of("FILL(a, REPEAT)", a=at(None, 2, None, 5)) == at(2, 2, 2, 5)
    assert value_of("FILL(a, LINEAR)", a=at(1, None, None, 4)) == at(1, 2, 3, 4)
    assert value_of("FILL(a, 0)", a={}) == {}
    assert value_of("FILL(a, 0) + FILL(b, 0)", a=at(1), b={}) == {}  # nothing to add to


def test_if_picks_per_timestamp_and_drops_without_a_false_branch() -> None:
    total, bad = at(20, 5, 0, 10), at(10, 5, 0, 1)
    assert value_of("IF(total >= 10, bad / total, 0)", total=total, bad=bad) == at(0.5, 0, 0, 0.1)
    assert value_of("IF(total >= 10, bad)", total=total, bad=bad) == {STAMPS[0]: 10.0, STAMPS[3]: 1.0}
    assert value_of("IF(1, bad, total)", total=total, bad=bad) == bad


def test_reducers_of_an_array_are_series_and_of_one_series_scalars() -> None:
    a, b = at(1, None, 3), at(5, 6, None)
    assert value_of("SUM([a, b])", a=a, b=b) == at(6, 6, 3)
    assert value_of("AVG([a, b])", a=a, b=b) == at(3, 6, 3)
    assert value_of("MIN([a, b])", a=a, b=b) == at(1, 6, 3)
    assert value_of("MAX([a, b])", a=a, b=b) == at(5, 6, 3)
    assert value_of("MAX(a)", a=a) == 3.0
    assert value_of("a / SUM(a)", a=a) == at(0.25, None, 0.75)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.integers(-1000, 1000)), min_size=4, max_size=4),
    st.lists(st.one_of(st.none(), st.integers(-1000, 1000)), min_size=4, max_size=4),
)
def test_series_addition_commutes_and_keeps_only_shared_timestamps(xs: list, ys: list) -> None:
    a, b = at(*xs), at(*ys)
    summed = value_of("a + b", a=a, b=b)
    assert summed == value_of("b + a", a=a, b=b)
    assert set(summed) == set(a) & set(b)  # type: ignore[arg-type]
    assert all(math.isfinite(v) for v in summed.values())  # type: ignore[union-attr]


# --------------------------------------------------------------------------- an alarm's queries


def _stat(query_id: str, metric: str, period: int = 3600) -> dict:
    return {
        "Id": query_id,
        "MetricStat": {
            "Metric": {
                "Namespace": "PipeOps",
                "MetricName": metric,
                "Dimensions": [{"Name": "Service", "Value": "p"}],
            },
            "Period": period,
            "Stat": "Sum",
        },
        "ReturnData": False,
    }


def burn_alarm(window: int = 3600, threshold: float = 0.144) -> dict:
    """The SLO burn-rate alarm shape: bad / total over one window, with a minimum-events guard."""
    return {
        "AlarmName": f"slo-burn-{window}",
        "Metrics": [
            _stat("good", "FilesOnTime", window),
            _stat("late", "FilesLate", window),
            _stat("overdue", "FilesOverdue", window),
            {"Id": "bad", "Expression": "FILL(late, 0) + FILL(overdue, 0)", "ReturnData": False},
            {"Id": "total", "Expression": "FILL(good, 0) + bad", "ReturnData": False},
            {"Id": "burn", "Expression": "IF(total >= 10, bad / total, 0)", "ReturnData": True},
        ],
        "EvaluationPeriods": 1,
        "DatapointsToAlarm": 1,
        "Threshold": threshold,
        "ComparisonOperator": "GreaterThanOrEqualToThreshold",
        "TreatMissingData": "notBreaching",
    }


def test_queries_are_ordered_so_each_expression_follows_what_it_uses() -> None:
    queries = parse_queries("x", list(reversed(burn_alarm()["Metrics"])))
    assert [query_id for query_id, _ in queries.expressions] == ["bad", "total", "burn"]
    assert queries.returned == "burn" and queries.period_seconds == 3600


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda m: [*m, {"Id": "e", "Expression": "burn", "ReturnData": True}],
            "exactly one query must return data",
        ),
        (lambda m: [m[0], {"Id": "e", "Expression": "nope * 2"}], "unknown id 'nope'"),
        (
            lambda m: [
                m[0],
                {"Id": "e", "Expression": "f"},
                {"Id": "f", "Expression": "e", "ReturnData": False},
            ],
            "cycle",
        ),
        (lambda m: [m[0], _stat("p", "P", 60), {"Id": "e", "Expression": "good + p"}], "same Period"),
        (lambda m: [m[0], {"Id": "e", "Expression": "DIFF(good)"}], "unsupported function 'DIFF'"),
    ],
)
def test_an_alarms_queries_are_checked_and_errors_name_the_alarm(change, message: str) -> None:
    with pytest.raises(MetricMathError, match=rf"alarm 'slo'.*{message.replace('(', '.').replace(')', '.')}"):
        parse_queries("slo", change(burn_alarm()["Metrics"]))


# --------------------------------------------------------------------------- burn-rate replays

HOUR_ALARM = AlarmRule.from_put_metric_alarm(burn_alarm())
NOW = datetime(2026, 12, 1, 12, 0, 40, tzinfo=UTC)  # evaluated at 12:00:40: the hour ends at 12:00


def outcomes(outcomes: str, start: datetime, spread: timedelta) -> dict[str, list[Sample]]:
    """Files reaching their outcome evenly over ``spread`` from ``start``, ``g`` on time and ``l``
    late: each publishes both FilesOnTime and FilesLate (1 and 0), and the reconciler publishes
    FilesOverdue (0) every 5 minutes -- so every query has data wherever there is traffic."""
    count = len(outcomes)
    stamps = [start + spread * (k + 0.5) / count for k in range(count)]
    passes = int(spread / timedelta(minutes=5))
    return {
        "good": [Sample(t, float(o == "g")) for t, o in zip(stamps, outcomes, strict=True)],
        "late": [Sample(t, float(o == "l")) for t, o in zip(stamps, outcomes, strict=True)],
        "overdue": [Sample(start + timedelta(minutes=5 * k + 1), 0.0) for k in range(passes)],
    }


def test_sustained_failures_fire_the_hour_window() -> None:
    verdict = evaluate_math_samples(
        HOUR_ALARM, outcomes("l" * 30, NOW - timedelta(hours=1), timedelta(minutes=59)), NOW
    )
    assert verdict.state is AlarmState.ALARM
    assert [p.value for p in verdict.datapoints] == [1.0]
    assert verdict.datapoints[0].timestamp == datetime(2026, 12, 1, 11, 0, tzinfo=UTC)


def test_a_blip_of_a_few_late_files_in_an_hour_of_good_ones_does_not_fire() -> None:
    samples = outcomes("g" * 150 + "lll" + "g" * 150, NOW - timedelta(hours=1), timedelta(minutes=59))
    verdict = evaluate_math_samples(HOUR_ALARM, samples, NOW)
    assert verdict.state is AlarmState.OK
    assert verdict.datapoints[0].value == pytest.approx(3 / 303)


def test_a_quiet_hour_with_one_late_file_does_not_fire_thanks_to_the_minimum_events_guard() -> None:
    samples = outcomes("l", NOW - timedelta(hours=1), timedelta(minutes=59))
    verdict = evaluate_math_samples(HOUR_ALARM, samples, NOW)
    assert verdict.state is AlarmState.OK and verdict.datapoints[0].value == 0.0
    unguarded = AlarmRule.from_put_metric_alarm(
        burn_alarm()
        | {"Metrics": [*burn_alarm()["Metrics"][:5], {"Id": "burn", "Expression": "bad / total"}]}
    )
    assert evaluate_math_samples(unguarded, samples, NOW).state is AlarmState.ALARM  # the guard is what holds


def test_no_traffic_at_all_is_missing_data_and_not_breaching() -> None:
    verdict = evaluate_math_samples(HOUR_ALARM, {}, NOW)
    assert verdict.state is AlarmState.OK and verdict.datapoints[0].value is None


def test_a_metric_never_published_in_the_range_empties_the_sums_it_is_filled_into() -> None:
    """FILL cannot fill a series with no datapoint in the range (evaluate, 9.): late files alone,
    with FilesOnTime and FilesOverdue never published, leave ``total`` empty -- the indicators
    must publish their zeros for the alarm to see failures."""
    only_late = {"late": [Sample(NOW - timedelta(minutes=k), 1.0) for k in range(1, 40)]}
    verdict = evaluate_math_samples(HOUR_ALARM, only_late, NOW)
    assert verdict.state is AlarmState.OK and verdict.datapoints[0].value is None


def test_summing_an_array_sees_failures_when_only_late_files_are_published() -> None:
    """SUM over an array adds the members that have a value: the shape for indicators published
    only when they count something (a run's files on time *or* late, overdue only when any)."""
    robust = [
        *burn_alarm()["Metrics"][:3],
        {"Id": "bad", "Expression": "SUM([FILL(late, 0), FILL(overdue, 0)])", "ReturnData": False},
        {"Id": "total", "Expression": "SUM([FILL(good, 0), bad])", "ReturnData": False},
        {"Id": "burn", "Expression": "IF(total >= 10, bad / total, 0)", "ReturnData": True},
    ]
    rule = AlarmRule.from_put_metric_alarm(burn_alarm() | {"Metrics": robust})
    minutes = range(1, 40)
    only_late = {"late": [Sample(NOW - timedelta(minutes=k), 1.0) for k in minutes]}
    assert evaluate_math_samples(rule, only_late, NOW).state is AlarmState.ALARM
    only_good = {"good": [Sample(NOW - timedelta(minutes=k), 1.0) for k in minutes]}
    assert evaluate_math_samples(rule, only_good, NOW).state is AlarmState.OK
    one_late = {"late": [Sample(NOW - timedelta(minutes=3), 1.0)]}
    assert evaluate_math_samples(rule, one_late, NOW).state is AlarmState.OK  # the guard


def test_the_sliding_hour_fires_minutes_after_failures_start_not_at_the_top_of_the_hour() -> None:
    """A file every 30 s from 11:00, all late from 11:20: the sliding hour's bad share reaches
    14.4% 4 minutes later (8 late of 48), long before the clock hour ends at 12:00."""
    start = datetime(2026, 12, 1, 11, 0, tzinfo=UTC)
    samples = outcomes("g" * 40 + "l" * 80, start, timedelta(hours=1))
    moments = [start + timedelta(minutes=m, seconds=5) for m in range(20, 61)]
    verdicts = replay(HOUR_ALARM, samples, moments)
    first = next(m for m, v in zip(moments, verdicts, strict=True) if v.state is AlarmState.ALARM)
    assert first == datetime(2026, 12, 1, 11, 24, 5, tzinfo=UTC)  # 6 of 46 (13%) a minute before
    assert all(v.state is AlarmState.ALARM for v in verdicts[moments.index(first) :])


def test_evaluate_math_takes_per_period_datapoints_by_query_id() -> None:
    hour = datetime(2026, 12, 1, 11, 0, tzinfo=UTC)
    firing = evaluate_math(
        HOUR_ALARM, {"good": {hour: 50.0}, "late": {hour: 10.0}, "overdue": {hour: 0.0}}, NOW
    )
    quiet = evaluate_math(HOUR_ALARM, {"good": {hour: 500.0}, "overdue": {hour: 1.0}}, NOW)
    assert (firing.state, quiet.state) == (AlarmState.ALARM, AlarmState.OK)


def test_a_single_metric_alarm_is_not_evaluated_as_metric_math() -> None:
    single = AlarmRule("x", "Sum", 60, 1, 1, 1.0, "GreaterThanThreshold")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a metric-math alarm"):
        evaluate_math(single, {}, NOW)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40), st.integers(0, 5)), min_size=1, max_size=3),
    st.integers(0, 59),
)
def test_the_burn_shape_is_the_bad_share_of_the_sliding_hour_above_the_guard(
    minutes: list[tuple[int, int, int]], second: int
) -> None:
    """Per-minute counts (on time, late, overdue) in the minutes before ``now``: the returned
    datapoint is bad / total of the hour ending at now's minute, 0 below ten files."""
    now = NOW.replace(second=second)
    samples: dict[str, list[Sample]] = {"good": [], "late": [], "overdue": []}
    for k, counts in enumerate(minutes, start=1):
        moment = NOW.replace(second=0) - timedelta(minutes=k) + timedelta(seconds=7)
        for query_id, count in zip(("good", "late", "overdue"), counts, strict=True):
            samples[query_id].append(Sample(moment, float(count)))
    good, late, overdue = (sum(c[i] for c in minutes) for i in range(3))
    total, bad = good + late + overdue, late + overdue
    verdict = evaluate_math_samples(HOUR_ALARM, samples, now)
    assert verdict.datapoints[0].timestamp == NOW.replace(second=0) - timedelta(hours=1)
    assert verdict.datapoints[0].value == pytest.approx(bad / total if total >= 10 else 0.0)
    assert (verdict.state is AlarmState.ALARM) == (total >= 10 and bad / total >= 0.144)
