"""The objectives (alarms/slos.py), their burn-rate alarms (alarms/slo_alarms.py) and the budget math."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from alarms.evaluate import AlarmRule, AlarmState, evaluate_math
from alarms.slo_alarms import (
    BurnPair,
    WindowAlarm,
    burn_pairs,
    page_pairs,
    target_condition,
)
from alarms.slos import (
    DEFAULT_TARGET,
    POLICY,
    SLO_TARGETS,
    budget_remaining,
    burn_rate,
    exhaustion_seconds,
    min_files,
    target_problems,
    threshold,
    time_to_fire_seconds,
)
from pipeops.slo import build_report, trailing_sums
from pipeops.template_build import TemplateBuildError, build_text, generated_resources
from stack.template import TEMPLATE_PATH, load_template

TEMPLATE = load_template()
GENERATED = generated_resources(TEMPLATE)
PAIRS = burn_pairs()
WINDOWS = [(pair, window) for pair in PAIRS for window in pair.windows]


def resolve_target(value: Any, target: str) -> Any:
    """A `by_target` expression as CloudFormation would resolve it with SloTarget = `target`."""
    if isinstance(value, dict) and "Fn::If" in value:
        condition, when_true, when_false = value["Fn::If"]
        chosen = when_true if condition == target_condition(target) else when_false
        return resolve_target(chosen, target)
    return value


# -- the target ---------------------------------------------------------------------------------


@pytest.mark.parametrize("target", SLO_TARGETS)
def test_every_allowed_target_is_one_the_alarms_work_at(target: str) -> None:
    assert target_problems(target) == []


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("90", "too low: the 14.4x pair would need more than every file bad (14.4 x 0.1 >= 1); the target must be above 93.06%"),
        ("93", "the target must be above 93.06%"),
        ("99.96", "spends the 28-day budget in 16.128 minutes, before its first bad file can show (20 minutes"),
        ("99.99", "the target must be below 99.9504%"),
        ("100", "a 100% objective has no budget"),
        ("0", "is not a target"),
        ("ninety", "is not a number"),
    ],
)
def test_a_target_the_alarms_cannot_work_at_is_rejected_with_the_reason(target: str, reason: str) -> None:
    problems = target_problems(target)
    assert problems and reason in " ".join(problems)


def test_the_bounds_are_where_the_reasons_say() -> None:
    assert target_problems("93.1") == [] and target_problems("93.05")  # 1 - 1/14.4 = 93.0556%
    assert target_problems("99.95") == [] and target_problems("99.951")  # 1 - 20 min / 28 d = 99.9504%
    # A longer deadline moves the upper bound down: 30 + 5 minutes -> 1 - 35/40320 = 99.913%.
    assert target_problems("99.95", deadline_minutes=30)


def test_the_template_build_fails_with_the_reason_for_a_target_the_alarms_cannot_work_at() -> None:
    text = TEMPLATE_PATH.read_text(encoding="utf-8")
    allowed = '    AllowedValues: ["95", "98", "99", "99.5", "99.9"]\n'
    assert allowed in text
    with pytest.raises(TemplateBuildError, match=re.escape("99.99% is too high")):
        build_text(text.replace(allowed, '    AllowedValues: ["95", "98", "99", "99.5", "99.99"]\n'))
    with pytest.raises(TemplateBuildError, match="must have AllowedValues"):
        build_text(text.replace(allowed, '    AllowedValues: ["98", "99", "99.5", "99.9"]\n'))
    with pytest.raises(TemplateBuildError, match=re.escape("add the condition `SloTarget99p5")):
        build_text(text.replace('  SloTarget99p5: !Equals [!Ref SloTarget, "99.5"]\n', ""))


# -- the policy and the generated alarms --------------------------------------------------------


def test_the_thresholds_at_99_percent_are_the_workbooks() -> None:
    assert [threshold(alert, "99") for alert in POLICY] == [0.144, 0.06, 0.03]
    assert [threshold(alert, "99.9") for alert in POLICY] == [0.0144, 0.006, 0.003]
    assert [(alert.long_seconds, alert.short_seconds) for alert in POLICY] == [(3600, 300), (21600, 1800), (86400, 7200)]
    assert [round(alert.exhaustion_days, 2) for alert in POLICY] == [1.94, 4.67, 9.33]


def test_the_long_windows_guard_keeps_one_bad_file_alone_below_the_threshold() -> None:
    assert [min_files(alert, "99") for alert in POLICY] == [7, 17, 34]
    assert [min_files(alert, "99.9") for alert in POLICY] == [70, 167, 334]
    for target in SLO_TARGETS:
        for alert in POLICY:
            guard = min_files(alert, target)
            assert 1 / guard < threshold(alert, target) <= 1 / (guard - 1)


@pytest.mark.parametrize(("pair", "window"), WINDOWS, ids=lambda item: getattr(item, "logical_id", ""))
def test_each_window_alarm_is_the_bad_share_against_burn_times_the_budget(pair: BurnPair, window: WindowAlarm) -> None:
    properties = GENERATED[window.logical_id]["Properties"]
    metrics = {query["Id"]: query for query in properties["Metrics"]}
    assert [query["Id"] for query in properties["Metrics"] if query.get("ReturnData", True)] == ["burn"]
    assert metrics["bad"]["Expression"] == "SUM([FILL(missed, 0), FILL(overdue, 0)])"
    assert metrics["total"]["Expression"] == "SUM([FILL(good, 0), bad])"
    for target in SLO_TARGETS:
        burn = resolve_target(metrics["burn"]["Expression"], target)
        guard = resolve_target(burn["Fn::Sub"][1]["MinFiles"], target) if isinstance(burn, dict) else "1"
        text = burn["Fn::Sub"][0] if isinstance(burn, dict) else burn
        assert text.replace("${MinFiles}", guard) == f"IF(total >= {window.min_files(target)}, bad / total, 0)"
        assert resolve_target(properties["Threshold"], target) == threshold(pair.alert, target)
    stats = [query["MetricStat"] for query in properties["Metrics"] if "MetricStat" in query]
    assert {stat["Period"] for stat in stats} == {window.seconds} and {stat["Stat"] for stat in stats} == {"Sum"}
    assert {stat["Metric"]["MetricName"] for stat in stats} == {"FilesOnTime", "FilesMissed", "FilesOverdue"}
    assert (properties["EvaluationPeriods"], properties["DatapointsToAlarm"]) == (1, 1)
    assert properties["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert properties["TreatMissingData"] == "notBreaching"
    assert not {"AlarmActions", "OKActions", "InsufficientDataActions"} & set(properties)  # the pair notifies


def test_each_pair_is_a_composite_of_its_windows_and_only_the_page_pairs_page() -> None:
    for pair in PAIRS:
        properties = GENERATED[pair.logical_id]["Properties"]
        long, short = pair.windows
        assert properties["AlarmRule"] == {"Fn::Sub": f'ALARM("${{{long.logical_id}}}") AND ALARM("${{{short.logical_id}}}")'}
        assert properties["AlarmActions"] == [{"Ref": "AlarmStateTopic"}] == properties["OKActions"]
    rule = GENERATED["PipelineUnhealthyAlarm"]["Properties"]["AlarmRule"]["Fn::Sub"]
    assert [pair.name_suffix for pair in page_pairs(PAIRS)] == ["FilesOnTimeFastBurn", "FilesOnTimeSlowBurn"]
    for pair in PAIRS:
        assert (f'ALARM("${{{pair.logical_id}}}")' in rule) == (pair in page_pairs(PAIRS))
        for window in pair.windows:
            assert window.logical_id not in rule


def test_each_description_names_severity_windows_burn_exhaustion_and_runbook() -> None:
    fast = PAIRS[0].description("99", "https://example.test/runbooks")
    assert fast.startswith("[page] The on-time objective (99% of files")
    assert "14.4x or faster over both 1h and 5m" in fast and "gone in 1.9 days" in fast
    assert fast.endswith("Runbook: https://example.test/runbooks/slo-burn.md")
    assert PAIRS[2].description("99", "b").startswith("[ticket]") and "gone in 9.3 days" in PAIRS[2].description("99", "b")


def deployed_rule(window: WindowAlarm, target: str = DEFAULT_TARGET) -> AlarmRule:
    """The evaluator's rule of the window alarm as the template deploys it with SloTarget = `target`."""
    properties = dict(GENERATED[window.logical_id]["Properties"])
    metrics = []
    for query in properties["Metrics"]:
        expression = resolve_target(query.get("Expression"), target)
        if isinstance(expression, dict):  # Fn::Sub with the guard
            text, variables = expression["Fn::Sub"]
            expression = text.replace("${MinFiles}", resolve_target(variables["MinFiles"], target))
        metrics.append(query | ({"Expression": expression} if expression is not None else {}))
    properties |= {"AlarmName": window.name_suffix, "Metrics": metrics}
    properties["Threshold"] = resolve_target(properties["Threshold"], target)
    return AlarmRule.from_put_metric_alarm(properties)


def replay(window: WindowAlarm, periods: tuple, previous: AlarmState = AlarmState.INSUFFICIENT_DATA) -> AlarmState:
    """The example periods (one window each, oldest first) through the evaluator's metric math,
    on the alarm as deployed: each period's (good, missed, overdue) as the three queries' Sums."""
    rule = deployed_rule(window)
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    moments = [now - timedelta(seconds=window.seconds * (len(periods) - i)) + timedelta(seconds=1) for i in range(len(periods))]
    stats = [query["Id"] for query in GENERATED[window.logical_id]["Properties"]["Metrics"] if "MetricStat" in query]
    # Each indicator's counts on its first emitter's query (`good` itself, or `good1` of a sum).
    ids = [next(i for i in stats if i.rstrip("0123456789") == name) for name in ("good", "missed", "overdue")]
    datapoints = {
        query_id: {moment: value[k] for moment, value in zip(moments, periods, strict=True) if value[k] is not None}
        for k, query_id in enumerate(ids)
    }
    return evaluate_math(rule, datapoints, now, previous).state


@pytest.mark.parametrize(("pair", "window"), WINDOWS, ids=lambda item: getattr(item, "logical_id", ""))
def test_each_window_fires_on_its_firing_series_and_stays_quiet_on_its_quiet_one(pair: BurnPair, window: WindowAlarm) -> None:
    assert replay(window, window.fires_on) is AlarmState.ALARM
    assert replay(window, window.quiet_on, AlarmState.ALARM) is AlarmState.OK


def test_a_quiet_hour_with_one_missed_file_does_not_page_but_a_busy_burning_hour_does() -> None:
    fast_long = PAIRS[0].long
    assert replay(fast_long, ((3, 1, None),)) is AlarmState.OK  # 4 files: below the guard
    assert replay(fast_long, ((6, 1, None),)) is AlarmState.OK  # 7 files: one bad alone is below 0.144
    assert replay(fast_long, ((5, 2, None),)) is AlarmState.ALARM  # two are not
    # Only missed files published (no run's end in the window sent its FilesOnTime zero): the total
    # is still the missed files, so an outage pages.
    assert replay(fast_long, ((None, 8, None),)) is AlarmState.ALARM
    assert replay(fast_long, ((None, None, 8),)) is AlarmState.ALARM  # only overdue
    assert replay(PAIRS[0].short, ((None, 1, None),)) is AlarmState.ALARM  # the short window needs one file


@pytest.mark.parametrize("target", SLO_TARGETS)
def test_the_deployed_guard_and_threshold_follow_the_target(target: str) -> None:
    fast_long = PAIRS[0].long
    rule = deployed_rule(fast_long, target)
    guard = min_files(PAIRS[0].alert, target)
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    moment = now - timedelta(minutes=30)

    stats = [query["Id"] for query in GENERATED[fast_long.logical_id]["Properties"]["Metrics"] if "MetricStat" in query]

    def state(good: float, missed: float) -> AlarmState:  # each on its first emitter's query, split over two when summed
        good_ids = [i for i in stats if i.rstrip("0123456789") == "good"]
        missed_ids = [i for i in stats if i.rstrip("0123456789") == "missed"]
        data = {good_ids[0]: {moment: good}, missed_ids[-1]: {moment: missed}}
        return evaluate_math(rule, data, now).state

    assert state(guard - 2, 1) is AlarmState.OK  # below the guard: 0
    assert state(guard - 1, 1) is AlarmState.OK  # at the guard, one bad file is below the threshold
    assert state(guard - 2, 2) is AlarmState.ALARM


# -- the budget ---------------------------------------------------------------------------------


def test_the_budget_math_by_hand() -> None:
    # 99%: 1,000 files with 4 bad spend 4 of the 10 allowed: 60% left; a burn of 0.4.
    assert budget_remaining(996, 4, "99") == pytest.approx(0.6)
    assert burn_rate(996, 4, "99") == pytest.approx(0.4)
    # 15 bad of 100 is a burn of 15 (above the fast pair's 14.4).
    assert burn_rate(85, 15, "99") == pytest.approx(15.0)
    # Overspent: 30 bad of 1,000 is three budgets: -200%.
    assert budget_remaining(970, 30, "99") == pytest.approx(-2.0)
    assert budget_remaining(0, 0, "99") == 1.0 and burn_rate(0, 0, "99") is None
    # At 14.4x a whole budget lasts 28 d / 14.4 = 46.67 h; 60% of it 28 h.
    assert exhaustion_seconds(14.4) / 3600 == pytest.approx(46.666, rel=1e-3)
    assert exhaustion_seconds(14.4, 0.6) / 3600 == pytest.approx(28.0)
    assert math.isinf(exhaustion_seconds(0))


def test_the_report_per_window_and_the_time_to_exhaustion() -> None:
    end = datetime(2026, 1, 2, tzinfo=UTC)
    by_window = {300: (5, 1), 1800: (20, 2), 3600: (85, 15), 7200: (150, 15), 21600: (400, 20), 86400: (970, 20)}
    report = build_report("99", end, by_window, (9_960, 40))
    assert report.budget_remaining == pytest.approx(0.6)
    hour = next(w for w in report.windows if w.window == "1h")
    assert (hour.bad_share, hour.burn_rate) == (pytest.approx(0.15), pytest.approx(15.0))
    # 60% of 28 days at a burn of 15: 0.6 * 672 h / 15 = 26.88 h.
    assert report.exhaustion_hours == pytest.approx(26.88)
    assert [(p.name, p.firing) for p in report.pairs] == [("FastBurn", True), ("SlowBurn", False), ("SteadyBurn", False)]
    # The same burn in an hour of 5 files is below the fast pair's guard (7): not firing.
    quiet = build_report("99", end, by_window | {3600: (4, 1)}, (9_960, 40))
    assert quiet.pairs[0].firing is False


def test_trailing_sums_take_the_buckets_that_start_inside_each_window() -> None:
    end = datetime(2026, 1, 2, tzinfo=UTC)
    points = [(end - timedelta(minutes=5), 1.0), (end - timedelta(minutes=30), 2.0), (end - timedelta(minutes=35), 4.0)]
    assert trailing_sums(points, end, [300, 1800, 3600]) == {300: 1.0, 1800: 3.0, 3600: 7.0}


def test_default_target_is_allowed() -> None:
    assert DEFAULT_TARGET in SLO_TARGETS and TEMPLATE["Parameters"]["SloTarget"]["Default"] == DEFAULT_TARGET


# -- the dashboard ------------------------------------------------------------------------------


def test_the_operations_dashboard_shows_the_objectives_row_after_the_critical_charts() -> None:
    from alarms.catalog import build_catalog
    from dashboards.build import operations_body
    from dashboards.limits import problems

    body = operations_body(build_catalog(TEMPLATE), TEMPLATE)
    titles = [w["properties"].get("title") for w in body["widgets"] if w["type"] == "metric"]
    expected = ["Error budget left, last 28 days"] + [f"Burn rate, last {w}" for w in ("1d", "6h", "2h", "1h", "30m", "5m")]
    start = titles.index(expected[0])
    assert titles[start : start + len(expected)] == expected
    # FilesLost's chart carries a critical alarm: it comes first.
    assert "Files against their deadline: on time, missed (failed or late), overdue, lost" in titles[:start]
    budget = next(w for w in body["widgets"] if w["properties"].get("title") == expected[0])["properties"]
    assert (budget["view"], budget["start"], budget["setPeriodToTimeRange"]) == ("singleValue", "-P28D", True)
    assert budget["metrics"][-1] == [{"expression": "1 - share / (1 - ${SloTarget} / 100)", "id": "budget", "label": "share of the budget left"}]
    row = [w for w in body["widgets"] if w["properties"].get("title") in expected]
    assert problems({"widgets": row}) == []


@pytest.mark.parametrize("logical_id", [w.logical_id for _, w in WINDOWS] + [p.logical_id for p in PAIRS])
def test_each_deployed_description_fits_cloudwatchs_limit_with_the_longest_base_and_target(logical_id: str) -> None:
    text = GENERATED[logical_id]["Properties"]["AlarmDescription"]["Fn::Sub"]
    deployed = text.replace("${RunbookBaseUrl}", "x" * 256).replace("${SloTarget}", "99.5")
    assert "${" not in deployed and len(deployed) <= 1024
    assert deployed.endswith("x" * 256 + "/slo-burn.md")


def test_alarms_list_names_the_burn_alarms_runbook() -> None:
    from alarms.live import runbook_of

    assert runbook_of("pipeops-FilesOnTimeFastBurn", "pipeops") == "slo-burn"
    assert runbook_of("pipeops-FilesOnTimeSteadyBurn2h", "pipeops") == "slo-burn"
    assert runbook_of("pipeops-FilesLost", "pipeops") == "file-lost"
    assert runbook_of("other-FilesOnTimeFastBurn", "pipeops") == ""


def test_the_time_to_fire_at_a_steady_error_rate() -> None:
    fast, slow, steady = POLICY
    # Every file bad: 14.4% of the sliding hour, 8.64 minutes; 6% of 6 h, 21.6 min; 3% of a day, 43.2 min.
    assert time_to_fire_seconds(fast, "99", 1.0) == pytest.approx(518.4)
    assert time_to_fire_seconds(slow, "99", 1.0) == pytest.approx(1296)
    assert time_to_fire_seconds(steady, "99", 1.0) == pytest.approx(2592)
    # Half the files bad: twice as long; 10% bad never fires the fast pair (below 14.4%).
    assert time_to_fire_seconds(fast, "99", 0.5) == pytest.approx(1036.8)
    assert time_to_fire_seconds(fast, "99", 0.10) is None and time_to_fire_seconds(slow, "99", 0.10) == pytest.approx(12960)


def test_the_target_checks_defaults_are_the_templates_and_the_catalogs() -> None:
    from alarms.catalog import RECONCILE_RUN_SECONDS
    from alarms.slos import DEFAULT_FILE_DEADLINE_MINUTES, DEFAULT_RECONCILE_RUN_MINUTES

    assert DEFAULT_RECONCILE_RUN_MINUTES * 60 == RECONCILE_RUN_SECONDS
    assert TEMPLATE["Parameters"]["FileDeadlineMinutes"]["Default"] == DEFAULT_FILE_DEADLINE_MINUTES


def test_a_report_with_no_file_due_spends_nothing_and_never_runs_out() -> None:
    from alarms.slos import WINDOWS as ALL_WINDOWS

    report = build_report("99", datetime(2026, 1, 2, tzinfo=UTC), {w: (0, 0) for w in ALL_WINDOWS}, (0, 0))
    assert report.budget_remaining == 1.0 and report.exhaustion_hours is None
    assert {(w.bad_share, w.burn_rate, w.exhaustion_hours) for w in report.windows} == {(None, None, None)}
    assert not any(pair.firing for pair in report.pairs)
