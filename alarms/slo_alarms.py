"""The on-time objective's burn-rate alarms, generated from `alarms.slos` (objective and policy).

Each pair of the policy is three alarms: one metric-math alarm per window, each comparing the bad
share of the window's files with burn rate x (1 - SloTarget), and a composite
`ALARM(long) AND ALARM(short)`. Only the composite notifies: every pair's ALARM and OK go to the
state topic, and a page pair is also a child of `PipelineUnhealthy`, so that an outage that fires
a cause alarm and a burn pages once (`alarms.cloudformation`, one page per incident). The window
alarms have no actions: a window alone means nothing.

These are the exception to "every alarm watches one metric" (docs/ARCHITECTURE.md#alarms): a share
needs the good and the bad counts, summed over every function that emits them.

A threshold is a number in CloudFormation, never an expression of a parameter, so each one is
chosen by conditions on SloTarget (`by_target`, one condition per allowed value, hand-written in
template.yaml and checked by `pipeops template build`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from alarms.catalog import RUNBOOK_BASE_SUB, WatchedMetric, runbook_link
from alarms.slos import (
    DEFAULT_TARGET,
    ON_TIME,
    POLICY,
    SLO_TARGETS,
    TARGET_PARAMETER,
    BurnAlert,
    Indicator,
    Severity,
    min_files,
    threshold,
    window_label,
)
from pipeline.stack import SERVICE_NAME, Function
from pipeline.telemetry.catalog import CATALOG, NAMESPACE, Metric
from runbooks.catalog import Runbook

PREFIX = "FilesOnTime"
Counts = tuple[float | None, float | None, float | None]  # one period's (good, missed, overdue)

def emitters(indicator: Indicator) -> tuple[Function, ...]:
    """The functions that emit `indicator`, from the metric catalog."""
    return CATALOG[Metric(indicator.value)].emitters


def indicator_metric(indicator: Indicator, emitter: Function) -> WatchedMetric:
    """`indicator` as `emitter` publishes it (the dimensions of `alarms.catalog.pipeline_metric`)."""
    dimensions = (("service", SERVICE_NAME), ("stage", {"Ref": "Stage"}), ("function", {"Ref": emitter.value}))
    return WatchedMetric(NAMESPACE, indicator.value, dimensions, emitter.value)


def target_condition(target: str) -> str:
    """The template condition that holds when SloTarget is `target` (99.5 -> SloTarget99p5)."""
    return f"{TARGET_PARAMETER}{target.replace('.', 'p')}"


def target_conditions() -> dict[str, Any]:
    """The conditions `by_target` needs (hand-written in template.yaml's Conditions)."""
    return {
        target_condition(target): {"Fn::Equals": [{"Ref": TARGET_PARAMETER}, target]}
        for target in SLO_TARGETS
        if target != DEFAULT_TARGET
    }


def by_target(value_of: Callable[[str], Any]) -> Any:
    """`value_of(SloTarget)` as a CloudFormation expression: nested Fn::If over the allowed targets."""
    value: Any = value_of(DEFAULT_TARGET)
    for target in reversed(SLO_TARGETS):
        if target != DEFAULT_TARGET:
            value = {"Fn::If": [target_condition(target), value_of(target), value]}
    return value


@dataclass(frozen=True)
class WindowAlarm:
    """One window of a pair: bad / (good + bad) over `seconds`, with a minimum-files guard."""

    alert: BurnAlert
    seconds: int
    fires_on: tuple[Counts, ...]  # periods (one window each), oldest first, at the default target
    quiet_on: tuple[Counts, ...]

    @property
    def is_long(self) -> bool:
        return self.seconds == self.alert.long_seconds

    @property
    def logical_id(self) -> str:
        return f"{PREFIX}{self.alert.name}{window_label(self.seconds)}Alarm"

    @property
    def name_suffix(self) -> str:
        return self.logical_id.removesuffix("Alarm")

    def min_files(self, target: str = DEFAULT_TARGET) -> int:
        """The guard: the long window's (`alarms.slos.min_files`); the short one needs a file."""
        return min_files(self.alert, target) if self.is_long else 1

    def threshold(self, target: str = DEFAULT_TARGET) -> float:
        return threshold(self.alert, target)

    def burn_expression(self, guard: int | str) -> str:
        return f"IF(total >= {guard}, bad / total, 0)"


@dataclass(frozen=True)
class BurnPair:
    alert: BurnAlert
    long: WindowAlarm
    short: WindowAlarm

    @property
    def logical_id(self) -> str:
        return f"{PREFIX}{self.alert.name}Alarm"

    @property
    def name_suffix(self) -> str:
        return self.logical_id.removesuffix("Alarm")

    @property
    def windows(self) -> tuple[WindowAlarm, WindowAlarm]:
        return (self.long, self.short)

    @property
    def runbook(self) -> Runbook:
        return Runbook.SLO_BURN

    def summary(self, target: str) -> str:
        alert = self.alert
        return (
            f"[{alert.severity.value}] The on-time objective ({target}% of files within FileDeadlineMinutes, over "
            f"{ON_TIME.period_days} days) burns its error budget at {alert.burn_rate:g}x or faster over both "
            f"{window_label(alert.long_seconds)} and {window_label(alert.short_seconds)}: at this burn the "
            f"{ON_TIME.period_days}-day budget is gone in {alert.exhaustion_days:.1f} days."
        )

    def description(self, target: str = f"${{{TARGET_PARAMETER}}}", base: str = RUNBOOK_BASE_SUB) -> str:
        return (
            f"{self.summary(target)} First: `pipeops slo` shows the burn per window; `pipeops alarms list` names the "
            f"cause alarms in ALARM, `pipeops jobs --status FAILED` the failed runs. Runbook: "
            f"{runbook_link(self.runbook, base)}"
        )


# Example periods per pair, (good, missed, overdue) files per window, at the default target (99%):
# the long window fires on a busy window with a high bad share and stays quiet on a quiet window
# with one missed file (below the guard); the short window fires on a small window that is still
# burning and stays quiet on a busy one with one missed file.
_EXAMPLES: dict[str, tuple[tuple[Counts, ...], tuple[Counts, ...], tuple[Counts, ...], tuple[Counts, ...]]] = {
    # threshold 0.144, guard 7: 15 of 55 = 0.27 | 4 files < 7 | 2 of 4 | 1 of 51 = 0.02
    "FastBurn": (((100, 0, 0), (40, 10, 5)), ((100, 0, 0), (3, 1, None)), ((2, 1, 1),), ((50, 1, None),)),
    # threshold 0.06, guard 17: 8 of 98 = 0.08 | 11 files < 17 | 3 of 33 = 0.09 | 2 of 62 = 0.03
    "SlowBurn": (((200, 5, 0), (90, 6, 2)), ((200, 5, 0), (10, 1, None)), ((30, 2, 1),), ((60, 2, None),)),
    # threshold 0.03, guard 34: 11 of 311 = 0.035 | 32 files < 34 | 2 of 62 = 0.032 | 1 of 101 = 0.01
    "SteadyBurn": (((500, 10, 0), (300, 8, 3)), ((500, 10, 0), (30, 2, None)), ((60, 1, 1),), ((100, 1, None),)),
}


def burn_pairs() -> list[BurnPair]:
    pairs = []
    for alert in POLICY:
        long_fires, long_quiet, short_fires, short_quiet = _EXAMPLES[alert.name]
        pairs.append(
            BurnPair(
                alert,
                WindowAlarm(alert, alert.long_seconds, long_fires, long_quiet),
                WindowAlarm(alert, alert.short_seconds, short_fires, short_quiet),
            )
        )
    return pairs


def window_alarm_ids(pairs: Sequence[BurnPair] | None = None) -> frozenset[str]:
    """Every window alarm's deployed suffix. A window notifies no one: it is judged through its
    pair's composite, and a long window stays in ALARM for up to its length after an incident spent
    budget (1 d for the ticket pair), the budget's memory, not an open problem."""
    return frozenset(window.name_suffix for pair in (pairs or burn_pairs()) for window in pair.windows)


def page_pairs(pairs: Sequence[BurnPair]) -> list[BurnPair]:
    return [pair for pair in pairs if pair.alert.severity is Severity.PAGE]


# -- CloudFormation -----------------------------------------------------------------------------


def _metric_stats(indicator: Indicator, query_id: str, seconds: int) -> list[dict[str, Any]]:
    """`query_id` as one MetricStat, or as the sum of one MetricStat per emitting function."""
    sources = emitters(indicator)

    def stat(one_id: str, emitter: Function) -> dict[str, Any]:
        watched = indicator_metric(indicator, emitter)
        metric = {
            "Namespace": watched.namespace,
            "MetricName": watched.name,
            "Dimensions": [{"Name": name, "Value": value} for name, value in watched.dimensions],
        }
        return {"Id": one_id, "MetricStat": {"Metric": metric, "Period": seconds, "Stat": "Sum"}, "ReturnData": False}

    if len(sources) == 1:
        return [stat(query_id, sources[0])]
    parts = [stat(f"{query_id}{i}", emitter) for i, emitter in enumerate(sources, 1)]
    summed = ", ".join(f"FILL({part['Id']}, 0)" for part in parts)
    return [*parts, {"Id": query_id, "Expression": f"SUM([{summed}])", "ReturnData": False}]


# SUM over an array adds the members that have a value in a period, where `+` of a series that
# has none in the range (FILL has nothing to fill) is empty: the indicators are published only
# when something counts (a run's end sends FilesOnTime and FilesMissed, zeros included, but a
# period may hold no run's end; a report-only reconciler sends no FilesOverdue), so an outage with
# files only overdue must still give a total.
BAD_EXPRESSION = "SUM([FILL(missed, 0), FILL(overdue, 0)])"
TOTAL_EXPRESSION = "SUM([FILL(good, 0), bad])"


def metrics(window: WindowAlarm) -> list[dict[str, Any]]:
    """good, missed, overdue -> bad, total -> burn (the bad share, 0 below the guard)."""
    guard: Any = by_target(lambda target: str(window.min_files(target)))
    burn = (
        {"Fn::Sub": [window.burn_expression("${MinFiles}"), {"MinFiles": guard}]}
        if isinstance(guard, dict)
        else window.burn_expression(guard)
    )
    return [
        *_metric_stats(Indicator.ON_TIME, "good", window.seconds),
        *_metric_stats(Indicator.MISSED, "missed", window.seconds),
        *_metric_stats(Indicator.OVERDUE, "overdue", window.seconds),
        {"Id": "bad", "Expression": BAD_EXPRESSION, "ReturnData": False},
        {"Id": "total", "Expression": TOTAL_EXPRESSION, "ReturnData": False},
        {"Id": "burn", "Expression": burn, "Label": "bad share of the files due", "ReturnData": True},
    ]


def window_resource(pair: BurnPair, window: WindowAlarm) -> dict[str, Any]:
    label = window_label(window.seconds)
    description = (
        f"The {label} window of {pair.name_suffix} (no action of its own: the pair's composite notifies). "
        f"{pair.description()}"
    )
    return {
        "Type": "AWS::CloudWatch::Alarm",
        "Properties": {
            "AlarmName": {"Fn::Sub": f"${{AWS::StackName}}-{window.name_suffix}"},
            "AlarmDescription": {"Fn::Sub": description},
            "Metrics": metrics(window),
            "EvaluationPeriods": 1,
            "DatapointsToAlarm": 1,
            "Threshold": by_target(window.threshold),
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            "TreatMissingData": "notBreaching",
            # Enabled with no action: `pipeops doctor` (alert-delivery) holds every alarm's actions
            # enabled, and the window has none to run.
            "ActionsEnabled": True,
        },
    }


def pair_resource(pair: BurnPair, state_topic: str) -> dict[str, Any]:
    rule = " AND ".join(f'ALARM("${{{window.logical_id}}}")' for window in pair.windows)
    return {
        "Type": "AWS::CloudWatch::CompositeAlarm",
        "Properties": {
            "AlarmName": {"Fn::Sub": f"${{AWS::StackName}}-{pair.name_suffix}"},
            "AlarmDescription": {"Fn::Sub": pair.description()},
            "AlarmRule": {"Fn::Sub": rule},
            "ActionsEnabled": True,
            "AlarmActions": [{"Ref": state_topic}],
            "OKActions": [{"Ref": state_topic}],
        },
    }


def resources(pairs: Sequence[BurnPair], state_topic: str) -> dict[str, Any]:
    """Every pair's window alarms and composite."""
    out: dict[str, Any] = {}
    for pair in pairs:
        for window in pair.windows:
            out[window.logical_id] = window_resource(pair, window)
        out[pair.logical_id] = pair_resource(pair, state_topic)
    return out


def check_conditions(template: Mapping[str, Any]) -> list[str]:
    """What template.yaml lacks for the thresholds' conditions (empty when nothing)."""
    conditions = template.get("Conditions", {})
    return [
        f"add the condition `{name}: !Equals [!Ref {TARGET_PARAMETER}, '{target}']`"
        for target in SLO_TARGETS
        if target != DEFAULT_TARGET
        for name in [target_condition(target)]
        if conditions.get(name) != {"Fn::Equals": [{"Ref": TARGET_PARAMETER}, target]}
    ]


# -- documentation ------------------------------------------------------------------------------


def pair_text(pair: BurnPair, stack: str, composite: str) -> list[str]:
    """The pair and its windows as Markdown bullets (the runbook page's generated block, the doc)."""
    alert = pair.alert
    who = f"pages through `{composite}`" if alert.severity is Severity.PAGE else "the state topic only, no page"
    long, short = (f"`{stack}-{window.name_suffix}`" for window in pair.windows)
    lines = [
        f"- `{stack}-{pair.name_suffix}`: composite, ALARM when {long} AND {short} are in ALARM "
        f"({alert.severity.value}: {who}); burn {alert.burn_rate:g}x, the 28-day budget gone in "
        f"{alert.exhaustion_days:.1f} days."
    ]
    for window in pair.windows:
        lines.append(
            f"- `{stack}-{window.name_suffix}`: the bad share of files (FilesMissed + FilesOverdue) / (FilesOnTime + "
            f"FilesMissed + FilesOverdue), Sum per {window.seconds} s, 0 below {window.min_files()} "
            f"file{'s' if window.min_files() > 1 else ''}; ALARM when greater than or equal to "
            f"{window.threshold():g} ({alert.burn_rate:g} x (1 - {DEFAULT_TARGET}%)) in 1 of 1 periods; missing data: "
            "notBreaching. No action of its own."
        )
    return lines


def names_of(runbook: Runbook, pairs: Sequence[BurnPair]) -> list[str]:
    """The alarm suffixes of the pairs that send people to `runbook`, each pair then its windows."""
    return [
        name
        for pair in pairs
        if pair.runbook == runbook
        for name in (pair.name_suffix, *(window.name_suffix for window in pair.windows))
    ]
