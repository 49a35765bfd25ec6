"""`pipeops slo`: the on-time objective now, per window, from CloudWatch (the alarms' own numbers).

Two GetMetricData calls (paginated): one for every window of the burn-rate policy (5-minute
buckets over the last day, each window the sum of its trailing buckets), one for the 28-day
budget (day buckets). One call for both would need 5-minute buckets over 28 days, 8,064 per
series. The end is the last whole 5 minutes: CloudWatch rounds a start time 15 to 63 days back
down to 5 minutes, so every window ends on the same boundary. On a time-scaled sandbox the windows
are wall-clock time.

The arithmetic is `alarms.slos` (pure); this module reads and assembles.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from alarms.slo_alarms import emitters
from alarms.slos import (
    BUDGET_DAYS,
    DAY_SECONDS,
    DEFAULT_FILE_DEADLINE_MINUTES,
    DEFAULT_TARGET,
    POLICY,
    TARGET_PARAMETER,
    WINDOWS,
    Indicator,
    budget_remaining,
    burn_rate,
    exhaustion_seconds,
    min_files,
    target_problems,
    window_label,
)
from pipeline.stack import SERVICE_NAME, Function

BUCKET_SECONDS = 300
_GOOD = (Indicator.ON_TIME,)
_BAD = (Indicator.MISSED, Indicator.OVERDUE)


@dataclass(frozen=True)
class WindowStatus:
    window: str
    seconds: int
    good: float
    bad: float
    bad_share: float | None  # None: no file due in the window
    burn_rate: float | None
    exhaustion_hours: float | None  # the budget left gone at this window's burn; None: never


@dataclass(frozen=True)
class PairStatus:
    name: str
    severity: str
    burn_rate: float
    firing: bool  # both windows at or above the pair's burn, the long one with its minimum of files


@dataclass(frozen=True)
class SloReport:
    target: str
    budget_days: int
    end: str
    good: float  # over the budget period
    bad: float
    budget_remaining: float  # share of the budget left (negative: overspent)
    windows: list[WindowStatus]
    pairs: list[PairStatus]
    exhaustion_hours: float | None  # at the 1-hour burn (the fast pair's long window); None: never

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def window_status(seconds: int, good: float, bad: float, target: str, remaining: float) -> WindowStatus:
    rate = burn_rate(good, bad, target)
    total = good + bad
    hours = exhaustion_seconds(rate or 0.0, remaining) / 3_600
    return WindowStatus(
        window=window_label(seconds),
        seconds=seconds,
        good=good,
        bad=bad,
        bad_share=bad / total if total else None,
        burn_rate=rate,
        exhaustion_hours=None if hours == float("inf") else hours,
    )


def _breaches(window: WindowStatus, rate: float, guard: int) -> bool:
    """As the window alarm decides: at least `guard` files, and the burn at `rate` or above."""
    return window.good + window.bad >= guard and (window.burn_rate or 0) >= rate


def build_report(
    target: str,
    end: datetime,
    by_window: Mapping[int, tuple[float, float]],
    budget: tuple[float, float],
) -> SloReport:
    """The report from (good, bad) counts per window (seconds) and over the budget period. Pure."""
    remaining = budget_remaining(*budget, target)
    windows = [window_status(seconds, *by_window[seconds], target, remaining) for seconds in WINDOWS]
    by_seconds = {status.seconds: status for status in windows}
    pairs = [
        PairStatus(
            name=alert.name,
            severity=alert.severity.value,
            burn_rate=alert.burn_rate,
            firing=_breaches(by_seconds[alert.long_seconds], alert.burn_rate, min_files(alert, target))
            and _breaches(by_seconds[alert.short_seconds], alert.burn_rate, 1),
        )
        for alert in POLICY
    ]
    return SloReport(
        target=target,
        budget_days=BUDGET_DAYS,
        end=end.isoformat(),
        good=budget[0],
        bad=budget[1],
        budget_remaining=remaining,
        windows=windows,
        pairs=pairs,
        exhaustion_hours=by_seconds[3_600].exhaustion_hours,
    )


def trailing_sums(points: Iterable[tuple[datetime, float]], end: datetime, windows: Sequence[int]) -> dict[int, float]:
    """The sum of the buckets that start within each window before `end`. Pure."""
    listed = list(points)
    return {
        seconds: sum(value for moment, value in listed if end - timedelta(seconds=seconds) <= moment < end)
        for seconds in windows
    }


# -- reading CloudWatch ---------------------------------------------------------------------------


def queries(functions: Mapping[str, str], stage: str, period: int) -> list[tuple[Indicator, dict[str, Any]]]:
    """One MetricStat query per indicator and emitting function (`functions`: logical id -> name)."""
    found: list[tuple[Indicator, dict[str, Any]]] = []
    for indicator in (*_GOOD, *_BAD):
        for emitter in emitters(indicator):
            dimensions = [
                {"Name": "service", "Value": SERVICE_NAME},
                {"Name": "stage", "Value": stage},
                {"Name": "function", "Value": functions[emitter.value]},
            ]
            metric = {"Namespace": "PipeOps", "MetricName": indicator.value, "Dimensions": dimensions}
            query = {
                "Id": f"q{len(found)}",
                "MetricStat": {"Metric": metric, "Period": period, "Stat": "Sum"},
                "ReturnData": True,
            }
            found.append((indicator, query))
    return found


def read_points(
    cloudwatch: Any, functions: Mapping[str, str], stage: str, start: datetime, end: datetime, period: int
) -> dict[str, list[tuple[datetime, float]]]:
    """Good and bad buckets (each summed over its indicators and emitters) between start and end."""
    planned = queries(functions, stage, period)
    side = {query["Id"]: ("good" if indicator in _GOOD else "bad") for indicator, query in planned}
    points: dict[str, list[tuple[datetime, float]]] = {"good": [], "bad": []}
    paginator = cloudwatch.get_paginator("get_metric_data")
    pages = paginator.paginate(
        MetricDataQueries=[query for _, query in planned], StartTime=start, EndTime=end, ScanBy="TimestampAscending"
    )
    for page in pages:
        for result in page.get("MetricDataResults", []):
            for moment, value in zip(result.get("Timestamps", []), result.get("Values", []), strict=False):
                stamp = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
                points[side[result["Id"]]].append((stamp, float(value)))
    return points


def window_end(now: datetime) -> datetime:
    """The last whole 5 minutes before `now`."""
    epoch = int(now.timestamp())
    return datetime.fromtimestamp(epoch - epoch % BUCKET_SECONDS, UTC)


def slo_report(
    cloudwatch: Any,
    functions: Mapping[str, str],
    stage: str,
    target: str,
    now: datetime,
    *,
    deadline_minutes: int = DEFAULT_FILE_DEADLINE_MINUTES,
) -> SloReport:
    """The objective's report at `now`. Raises ValueError for a target the alarms cannot work at
    (with the deployed FileDeadlineMinutes)."""
    problems = target_problems(target, deadline_minutes=deadline_minutes)
    if problems:
        raise ValueError("; ".join(problems))
    end = window_end(now)
    recent = read_points(cloudwatch, functions, stage, end - timedelta(seconds=max(WINDOWS)), end, BUCKET_SECONDS)
    good = trailing_sums(recent["good"], end, WINDOWS)
    bad = trailing_sums(recent["bad"], end, WINDOWS)
    period_seconds = BUDGET_DAYS * DAY_SECONDS
    month = read_points(cloudwatch, functions, stage, end - timedelta(seconds=period_seconds), end, DAY_SECONDS)
    budget = (sum(v for _, v in month["good"]), sum(v for _, v in month["bad"]))
    return build_report(target, end, {w: (good[w], bad[w]) for w in WINDOWS}, budget)


def stack_slo_report(connection: Any, resources: Any, target: str | None, now: datetime) -> SloReport:
    """The report of a deployed stack: at `target` (percent, a trailing % allowed), else the stack's
    SloTarget parameter, else the default; with its Stage, FileDeadlineMinutes and function names.
    Raises ValueError, naming the target, for one the alarms cannot work at."""
    from pipeops.dashboard import stack_parameters

    parameters = stack_parameters(connection, resources.stack_name)
    chosen = (target or parameters.get(TARGET_PARAMETER) or DEFAULT_TARGET).strip().removesuffix("%")
    functions = {function.value: getattr(resources, f"{function.value}Name") for function in Function}
    deadline = int(parameters.get("FileDeadlineMinutes") or DEFAULT_FILE_DEADLINE_MINUTES)
    try:
        return slo_report(connection.client("cloudwatch"), functions, parameters.get("Stage") or "dev", chosen, now,
                          deadline_minutes=deadline)
    except ValueError as exc:
        raise ValueError(f"--target {chosen}: {exc}") from None
