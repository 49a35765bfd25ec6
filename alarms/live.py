"""The stack's alarms as CloudWatch holds them, and the evaluator's verdict on the metrics now.

`pipeops alarms list` reads the states (AWS, or the sandbox's alarm engine). `pipeops alarms check`
replays each metric alarm with `alarms.evaluate` over the datapoints CloudWatch returns for its
evaluation range. It shows the datapoints that decided the verdict, so an on-call engineer can
see why an alarm is (or is not) firing without opening the console.

A time-scaled sandbox evaluates its alarms in virtual time (`sandbox.alarm_engine`): one
virtual 5-minute period lasts 15 real seconds there. Judged on the wall clock, its heartbeat
alarm would see no complete period yet and say ALARM while the engine says OK. So the check asks a
served sandbox for its clock (`GET /_sandbox/clock`: origin and factor) and, given one, judges in
virtual time too: it reads the raw samples (1-second statistics) of the real span of the range
and places them in virtual time as the engine does. Reasons then name each period by its
wall-clock start and its virtual one.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from alarms.catalog import AlarmSpec, build_catalog
from alarms.evaluate import (
    AlarmRule,
    AlarmState,
    Sample,
    cloudwatch_stamp,
    evaluate,
    evaluate_samples,
    evaluation_window,
    watched_metric,
)
from alarms.text import shorten

__all__ = ["CLOCK_PATH", "AlarmView", "Check", "SandboxClock", "check_alarms", "list_alarms", "sandbox_clock", "shorten"]



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


@dataclass(frozen=True)
class SandboxClock:
    """A time-scaled sandbox's clock: virtual = origin + (real - origin) / time_scale."""

    origin: datetime
    time_scale: float

    def virtual(self, real: datetime) -> datetime:
        return self.origin + (real - self.origin) / self.time_scale

    def real(self, virtual: datetime) -> datetime:
        return self.origin + (virtual - self.origin) * self.time_scale

    def stamp(self, virtual: datetime) -> str:
        real, shown = cloudwatch_stamp(self.real(virtual)), cloudwatch_stamp(virtual)
        return real if real == shown else f"{real}, virtual {shown}"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SandboxClock:
        origin = datetime.fromisoformat(str(data["origin"]))
        return cls(origin if origin.tzinfo else origin.replace(tzinfo=UTC), float(data["time_scale"]))


CLOCK_PATH = "/_sandbox/clock"


def sandbox_clock(endpoint_url: str | None, timeout: float = 5.0) -> SandboxClock | None:
    """The clock a served sandbox at `endpoint_url` evaluates its alarms on; None for AWS, or an
    endpoint that is not a time-scaled sandbox."""
    if not endpoint_url:
        return None
    try:
        with urllib.request.urlopen(endpoint_url.rstrip("/") + CLOCK_PATH, timeout=timeout) as response:
            clock = SandboxClock.from_dict(json.loads(response.read()))
    except (OSError, ValueError, KeyError, urllib.error.URLError):
        return None
    return None if clock.time_scale == 1.0 else clock


@cache
def _specs_by_suffix() -> dict[str, AlarmSpec]:
    from stack.template import load_template

    return {spec.name_suffix: spec for spec in build_catalog(load_template())}


def spec_of(alarm_name: str, stack_name: str, specs: Sequence[AlarmSpec] | None = None) -> AlarmSpec | None:
    """The catalog's spec of the stack's alarm `<stack>-<suffix>` (None: an alarm it does not
    define, such as the composite): template.yaml's, or those of `specs` (a sidecar's, built from its
    description). Its runbook and first step are read here, never parsed back out of the alarm's
    description."""
    prefix = f"{stack_name}-"
    by_suffix = _specs_by_suffix() if specs is None else {spec.name_suffix: spec for spec in specs}
    return by_suffix.get(alarm_name[len(prefix) :]) if alarm_name.startswith(prefix) else None


@cache
def _burn_runbooks() -> dict[str, str]:
    """The objectives' burn alarms (pairs and windows) by suffix, with their runbook."""
    from alarms.slo_alarms import burn_pairs

    return {
        name: pair.runbook.value
        for pair in burn_pairs()
        for name in (pair.name_suffix, *(window.name_suffix for window in pair.windows))
    }


def runbook_of(alarm_name: str, stack_name: str, specs: Sequence[AlarmSpec] | None = None) -> str:
    spec = spec_of(alarm_name, stack_name, specs)
    if spec:
        return spec.runbook.value
    if specs is not None:
        return ""  # a sidecar has no objectives' burn alarms
    prefix = f"{stack_name}-"
    return _burn_runbooks().get(alarm_name[len(prefix) :], "") if alarm_name.startswith(prefix) else ""


def _alarms(cloudwatch: Any, prefix: str) -> Iterator[tuple[str, dict[str, Any]]]:
    pages = cloudwatch.get_paginator("describe_alarms").paginate(
        AlarmNamePrefix=prefix, AlarmTypes=["MetricAlarm", "CompositeAlarm"]
    )
    for page in pages:
        for alarm in page.get("MetricAlarms", []):
            yield "metric", alarm
        for alarm in page.get("CompositeAlarms", []):
            yield "composite", alarm


def list_alarms(cloudwatch: Any, stack_name: str, specs: Sequence[AlarmSpec] | None = None) -> list[AlarmView]:
    """Every alarm of the stack (named `<stack>-…`), ALARM first, then by name; runbooks from
    template.yaml's catalog, or from `specs` (a sidecar's)."""
    views = [
        AlarmView(
            name=alarm["AlarmName"],
            state=alarm["StateValue"],
            reason=alarm.get("StateReason", ""),
            runbook=runbook_of(alarm["AlarmName"], stack_name, specs),
            metric="composite" if kind == "composite" else f"{alarm.get('Namespace')}/{alarm.get('MetricName')}",
            updated=str(alarm.get("StateUpdatedTimestamp", "")),
        )
        for kind, alarm in _alarms(cloudwatch, f"{stack_name}-")
    ]
    order = {AlarmState.ALARM.value: 0, AlarmState.INSUFFICIENT_DATA.value: 1, AlarmState.OK.value: 2}
    return sorted(views, key=lambda view: (order.get(view.state, 3), view.name))


def _statistics(rule: AlarmRule) -> dict[str, list[str]]:
    return {"ExtendedStatistics": [rule.statistic]} if rule.is_percentile else {"Statistics": [rule.statistic]}


def _datapoints(cloudwatch: Any, alarm: dict[str, Any], rule: AlarmRule, now: datetime) -> dict[datetime, float]:
    start, end = evaluation_window(rule, now)
    response = cloudwatch.get_metric_statistics(
        **watched_metric(alarm), StartTime=start, EndTime=end, Period=rule.period_seconds, **_statistics(rule)
    )
    points: dict[datetime, float] = {}
    for point in response.get("Datapoints", []):
        value = point.get("ExtendedStatistics", {}).get(rule.statistic) if rule.is_percentile else point.get(rule.statistic)
        if value is not None:
            points[point["Timestamp"]] = float(value)
    return points


_SET = ("SampleCount", "Sum", "Minimum", "Maximum")


def _virtual_samples(
    cloudwatch: Any, alarm: dict[str, Any], rule: AlarmRule, now: datetime, clock: SandboxClock
) -> list[Sample]:
    """The metric's 1-second statistics over the real span of the virtual evaluation range, as
    samples at their virtual moments (a percentile period weighs each second by its count)."""
    start, end = evaluation_window(rule, now)
    real_start, real_end = clock.real(start), clock.real(end) + timedelta(seconds=1)
    statistics: dict[str, list[str]] = {"Statistics": list(_SET)}
    if rule.is_percentile:
        statistics["ExtendedStatistics"] = [rule.statistic]
    response = cloudwatch.get_metric_statistics(
        **watched_metric(alarm), StartTime=real_start, EndTime=real_end, Period=1, **statistics
    )
    samples = []
    for point in response.get("Datapoints", []):
        count = float(point.get("SampleCount") or 0)
        if count <= 0:
            continue
        value = {
            "Minimum": point.get("Minimum"),
            "Maximum": point.get("Maximum"),
        }.get(rule.statistic, (point.get("Sum") or 0.0) / count)
        if rule.is_percentile:
            value = point.get("ExtendedStatistics", {}).get(rule.statistic)
        if value is not None:
            timestamp = point["Timestamp"] if point["Timestamp"].tzinfo else point["Timestamp"].replace(tzinfo=UTC)
            samples.append(Sample(clock.virtual(timestamp), float(value), count))
    return samples


def check_alarms(
    cloudwatch: Any, stack_name: str, now: datetime, clock: SandboxClock | None = None, specs: Sequence[AlarmSpec] | None = None
) -> list[Check]:
    """The evaluator's verdict for every metric alarm of the stack, from the metrics now (on the
    sandbox's virtual clock when `clock` is given; runbooks as `list_alarms`). Metric math other
    than FILL is left out."""
    checks: list[Check] = []
    for kind, alarm in _alarms(cloudwatch, f"{stack_name}-"):
        if kind == "composite":
            continue  # its state is what CloudWatch says
        try:
            rule = AlarmRule.from_put_metric_alarm(alarm)
        except ValueError:
            continue  # metric math the evaluator does not model: CloudWatch's state stands
        if rule.math is not None:
            continue  # metric math over several metrics: not fetched here, CloudWatch's state stands
        if alarm.get("Namespace") == "AWS/DynamoDB":
            rule = AlarmRule(**{**asdict(rule), "treat_missing_data": "ignore"})  # as CloudWatch does
        previous = AlarmState(alarm["StateValue"])
        if clock is None:
            verdict = evaluate(rule, _datapoints(cloudwatch, alarm, rule, now), now, previous)
        else:
            virtual_now = clock.virtual(now)
            samples = _virtual_samples(cloudwatch, alarm, rule, virtual_now, clock)
            verdict = evaluate_samples(rule, samples, virtual_now, previous, stamp=clock.stamp)
        checks.append(
            Check(
                name=alarm["AlarmName"],
                state=alarm["StateValue"],
                verdict=verdict.state.value,
                reason=verdict.reason,
                runbook=runbook_of(alarm["AlarmName"], stack_name, specs),
                datapoints=[
                    {"period_start": p.timestamp.isoformat(), "value": p.value, "breaching": p.breaching}
                    for p in verdict.datapoints
                ],
            )
        )
    return sorted(checks, key=lambda check: (check.verdict != AlarmState.ALARM.value, check.name))
