"""The stack's alarms as CloudWatch holds them, and the evaluator's verdict on the metrics now.

`pipeops alarms list` reads the states (AWS, or the sandbox's alarm engine). `pipeops alarms check`
replays each metric alarm with `alarms.evaluate` over the datapoints CloudWatch returns for its
evaluation range. It shows the datapoints that decided the verdict, so an on-call engineer can
see why an alarm is (or is not) firing without opening the console.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from alarms.evaluate import AlarmRule, AlarmState, evaluate, evaluation_window

_RUNBOOK = re.compile(r"Runbook: ([a-z0-9-]+)")


@dataclass(frozen=True)
class AlarmView:
    name: str
    state: str
    reason: str
    runbook: str
    metric: str  # "Namespace/MetricName", or "composite"
    updated: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Check:
    name: str
    state: str  # as CloudWatch holds it now
    verdict: str  # as the evaluator decides from the metrics now
    reason: str
    runbook: str
    datapoints: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def runbook_of(description: str | None) -> str:
    found = _RUNBOOK.search(description or "")
    return found.group(1) if found else ""


def _alarms(cloudwatch: Any, prefix: str) -> Iterator[tuple[str, dict[str, Any]]]:
    pages = cloudwatch.get_paginator("describe_alarms").paginate(
        AlarmNamePrefix=prefix, AlarmTypes=["MetricAlarm", "CompositeAlarm"]
    )
    for page in pages:
        for alarm in page.get("MetricAlarms", []):
            yield "metric", alarm
        for alarm in page.get("CompositeAlarms", []):
            yield "composite", alarm


def list_alarms(cloudwatch: Any, stack_name: str) -> list[AlarmView]:
    """Every alarm of the stack (named `<stack>-…`), ALARM first, then by name."""
    views = [
        AlarmView(
            name=alarm["AlarmName"],
            state=alarm["StateValue"],
            reason=alarm.get("StateReason", ""),
            runbook=runbook_of(alarm.get("AlarmDescription")),
            metric="composite" if kind == "composite" else f"{alarm.get('Namespace')}/{alarm.get('MetricName')}",
            updated=str(alarm.get("StateUpdatedTimestamp", "")),
        )
        for kind, alarm in _alarms(cloudwatch, f"{stack_name}-")
    ]
    order = {AlarmState.ALARM.value: 0, AlarmState.INSUFFICIENT_DATA.value: 1, AlarmState.OK.value: 2}
    return sorted(views, key=lambda view: (order.get(view.state, 3), view.name))


def _datapoints(cloudwatch: Any, alarm: dict[str, Any], rule: AlarmRule, now: datetime) -> dict[datetime, float]:
    start, end = evaluation_window(rule, now)
    statistic = rule.statistic
    extended = rule.is_percentile
    response = cloudwatch.get_metric_statistics(
        Namespace=alarm["Namespace"],
        MetricName=alarm["MetricName"],
        Dimensions=alarm.get("Dimensions", []),
        StartTime=start,
        EndTime=end,
        Period=rule.period_seconds,
        **({"ExtendedStatistics": [statistic]} if extended else {"Statistics": [statistic]}),
    )
    points: dict[datetime, float] = {}
    for point in response.get("Datapoints", []):
        value = point.get("ExtendedStatistics", {}).get(statistic) if extended else point.get(statistic)
        if value is not None:
            points[point["Timestamp"]] = float(value)
    return points


def check_alarms(cloudwatch: Any, stack_name: str, now: datetime) -> list[Check]:
    """The evaluator's verdict for every metric alarm of the stack, from the metrics now."""
    checks: list[Check] = []
    for kind, alarm in _alarms(cloudwatch, f"{stack_name}-"):
        if kind == "composite" or alarm.get("Metrics"):
            continue  # composite and metric-math alarms: their state is what CloudWatch says
        rule = AlarmRule.from_put_metric_alarm(alarm)
        previous = AlarmState(alarm["StateValue"])
        verdict = evaluate(rule, _datapoints(cloudwatch, alarm, rule, now), now, previous)
        checks.append(
            Check(
                name=alarm["AlarmName"],
                state=alarm["StateValue"],
                verdict=verdict.state.value,
                reason=verdict.reason,
                runbook=runbook_of(alarm.get("AlarmDescription")),
                datapoints=[
                    {"period_start": p.timestamp.isoformat(), "value": p.value, "breaching": p.breaching}
                    for p in verdict.datapoints
                ],
            )
        )
    return sorted(checks, key=lambda check: (check.verdict != AlarmState.ALARM.value, check.name))
