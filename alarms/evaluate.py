"""CloudWatch metric-alarm semantics as pure functions, so alarms can be judged offline.

moto stores alarms but never evaluates them. This module moves an alarm's state the way
CloudWatch documents it, so unit tests can prove each alarm fires (and stays quiet) on a
series, and the sandbox can evaluate moto's alarms every period and call SetAlarmState.

Sources (AWS CloudWatch User Guide):

* "Configuring how CloudWatch alarms treat missing data" and "Avoiding premature transitions
  to alarm state":
  https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarms-and-missing-data.html
  (formerly AlarmThatSendsEmail.html#alarms-evaluating-missing-data)
* "Percentile-based alarms and low data samples":
  https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/percentiles-with-low-samples.html
* "CloudWatch statistics definitions":
  https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Statistics-definitions.html

What the documentation leaves open, and what this module does about it:

1. **Evaluation range.** CloudWatch retrieves "a higher number of data points than the number
   specified as Evaluation Periods"; the exact number is not published. The docs' worked
   example uses N = 3 and a range of 5, so the range here is N + ``EXTRA_RANGE_PERIODS`` (2)
   complete periods; ``range_periods=`` overrides it.
2. **Complete periods and delay.** Only periods whose end is <= ``now`` are evaluated; the
   period in progress is not. CloudWatch's own ingestion/evaluation lag is not modelled: pass
   an earlier ``now`` to simulate it.
3. **Real data first.** With >= N real datapoints in the range, the N most recent real ones
   are evaluated and TreatMissingData is not consulted. With fewer, every real datapoint in the
   range is evaluated and the shortfall is filled from the most recent missing periods ("uses
   missing data points only as few times as possible").
4. **``missing`` with a shortfall.** The docs' tables are reproduced exactly: ALARM if the real
   breaching datapoints reach M; ALARM by the premature-alarm rule (below); otherwise OK if a
   real datapoint is not breaching; otherwise (no data, or only breaching data too recent to
   confirm) INSUFFICIENT_DATA -- the earlier edition's table gives ``- - - - X`` that outcome.
5. **Premature-alarm rule.** The docs state it twice, once with "at least as old as ...
   Datapoints to Alarm" and once (for M out of N) with "... Evaluation Periods"; the 2-of-3
   table row ``- - - X -`` -> ALARM only fits M, so M is used. As stated, the rule would also
   fire on the 2-of-3 row ``0 - X - -``, which the table says is OK; the rule therefore applies
   only when no evaluated real datapoint is non-breaching. "Age" is the position among the N
   evaluated datapoints, newest = 1.
6. **``ignore``.** Decides like ``missing`` whenever real data decides (ALARM by count, or OK);
   wherever ``missing`` would give INSUFFICIENT_DATA or a premature ALARM, the table says
   "Retain current state", and so does this. (CloudWatch applies ``ignore`` to every AWS/DynamoDB
   alarm whatever is configured; the caller knows the namespace, this module does not.)
7. **Percentiles.** Nearest rank over the (count-weighted) values: the smallest value v with
   at least p% of the samples <= v, matching "p95: 95 percent of the data ... is lower". With
   EvaluateLowSampleCountPercentile = ``ignore``, a period with fewer than 10/(1-p) samples
   (p >= 0.5) or 10/p samples (p < 0.5) among the evaluated ones keeps the current state.
8. **Times and the evaluation window.** CloudWatch's default EvaluationWindow is a
   SlidingWindow, which "advances each time the alarm is evaluated, forming a rolling time
   window" (alarm-evaluation-window.html, below); a WallClockWindow aligns periods to clock
   boundaries instead. CloudWatch evaluates an alarm every minute, so here the periods *end at
   the evaluation time rounded down to the minute* (``SLIDING_STEP_SECONDS``): a 1-hour period
   evaluated at 10:37:20 covers [09:37, 10:37). A period of 60 s or less ends at ``now`` rounded
   down to the period, which is the same as aligning it to the epoch: every alarm written
   before this (60 s periods) behaves as it did. Alarms with longer periods (the reconciler's
   run-length periods) slide too, as on AWS: a breach is seen a minute after the minute it
   happens in, not when the clock period ends -- which is the point of a 1-hour or 1-day
   burn-rate window. WallClockWindow (an alarm setting EvaluationWindow) is not modelled: such
   alarms are refused. Naive datetimes are taken as UTC.
9. **``FILL(m, value)`` metric math** (an alarm whose ``Metrics`` are one metric and
   ``FILL`` of it, read into ``AlarmRule.fill``; other metric math is item 10). FILL "fills
   the missing values of a time series" over the queried range; a series with no datapoint in
   the range has nothing to fill and stays empty (the behaviour reported for alarms on FILL over a silent metric). So: with at
   least one real datapoint in the evaluation range, every period of the range has a value (the
   fill where none was published) and TreatMissingData is never consulted; with none, the
   alarm's TreatMissingData decides as for any alarm. Math alarms are not in the AWS/DynamoDB
   namespace: CloudWatch's forced ``ignore`` does not apply to them.
10. **Metric math.** Any other ``Metrics`` (MetricStat queries and expressions over their ids,
   the grammar of ``alarms.metric_math``) is read into ``AlarmRule.math``. Each MetricStat is
   aggregated over the evaluation range's periods (the alarm's Period, its own Stat), the
   expressions are evaluated over those aligned series (``alarms.metric_math``), and the
   returned series is judged as a single metric's datapoints would be (items 1-6). Every
   MetricStat must have the same Period, the alarm's. The low-sample percentile rule (7.) does
   not apply to the returned series. An unsupported function fails with its name and the
   alarm's.

Alarm evaluation window:
https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarm-evaluation-window.html
https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_SlidingWindow.html
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from fractions import Fraction
from typing import Any, TypeVar

from alarms.metric_math import MetricMathError, Queries, evaluate_queries, parse_queries

__all__ = [
    "EXTRA_RANGE_PERIODS",
    "SLIDING_STEP_SECONDS",
    "AlarmRule",
    "AlarmState",
    "Comparison",
    "Evaluated",
    "LowSampleCountPercentile",
    "Sample",
    "TreatMissingData",
    "Verdict",
    "aggregate",
    "aggregate_window",
    "cloudwatch_stamp",
    "evaluate",
    "evaluate_math",
    "evaluate_math_samples",
    "evaluate_samples",
    "evaluation_window",
    "math_metric",
    "minimum_samples",
    "replay",
    "watched_metric",
]

EXTRA_RANGE_PERIODS = 2
"""Periods retrieved beyond EvaluationPeriods (the docs' example: N = 3, evaluation range 5)."""
SLIDING_STEP_SECONDS = 60
"""How often CloudWatch evaluates an alarm: a sliding window's periods end on this step (8.)."""

STANDARD_STATISTICS = frozenset({"Sum", "Average", "Minimum", "Maximum", "SampleCount"})
_PERCENTILE = re.compile(r"p(\d{1,3}(?:\.\d+)?)")
_FILL = re.compile(r"\s*FILL\(\s*([a-z][A-Za-z0-9_]*)\s*,\s*(-?\d+(?:\.\d+)?)\s*\)\s*")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_E = TypeVar("_E", bound=StrEnum)


class Comparison(StrEnum):
    """CloudWatch's ComparisonOperator for static thresholds."""

    GREATER_THAN_OR_EQUAL_TO_THRESHOLD = "GreaterThanOrEqualToThreshold"
    GREATER_THAN_THRESHOLD = "GreaterThanThreshold"
    LESS_THAN_THRESHOLD = "LessThanThreshold"
    LESS_THAN_OR_EQUAL_TO_THRESHOLD = "LessThanOrEqualToThreshold"

    def breaches(self, value: float, threshold: float) -> bool:
        """Whether one datapoint is on the alarming side of the threshold."""
        match self:
            case Comparison.GREATER_THAN_OR_EQUAL_TO_THRESHOLD:
                return value >= threshold
            case Comparison.GREATER_THAN_THRESHOLD:
                return value > threshold
            case Comparison.LESS_THAN_THRESHOLD:
                return value < threshold
            case Comparison.LESS_THAN_OR_EQUAL_TO_THRESHOLD:
                return value <= threshold
        raise AssertionError(self)  # pragma: no cover - the match is exhaustive

    @property
    def phrase(self) -> str:
        """The words CloudWatch's StateReason uses for this operator."""
        return {
            Comparison.GREATER_THAN_OR_EQUAL_TO_THRESHOLD: "greater than or equal to",
            Comparison.GREATER_THAN_THRESHOLD: "greater than",
            Comparison.LESS_THAN_THRESHOLD: "less than",
            Comparison.LESS_THAN_OR_EQUAL_TO_THRESHOLD: "less than or equal to",
        }[self]


class TreatMissingData(StrEnum):
    """How periods without a datapoint count (only when real data is short of N)."""

    MISSING = "missing"
    IGNORE = "ignore"
    BREACHING = "breaching"
    NOT_BREACHING = "notBreaching"


class AlarmState(StrEnum):
    OK = "OK"
    ALARM = "ALARM"
    INSUFFICIENT_DATA = "INSUFFICIENT_DATA"


class LowSampleCountPercentile(StrEnum):
    """EvaluateLowSampleCountPercentile: whether thin percentile periods may move the state."""

    EVALUATE = "evaluate"
    IGNORE = "ignore"


def _percentile(statistic: str) -> Decimal | None:
    """The p of a "pNN.NN" statistic, or None for a standard one; ValueError if neither."""
    if statistic in STANDARD_STATISTICS:
        return None
    match = _PERCENTILE.fullmatch(statistic)
    if match is None or Decimal(match.group(1)) > 100:
        raise ValueError(
            f"unknown statistic {statistic!r}: expected one of {sorted(STANDARD_STATISTICS)} "
            "or a percentile p0..p100 such as 'p99' or 'p99.9'"
        )
    return Decimal(match.group(1))


def minimum_samples(statistic: str) -> int:
    """Samples a period needs before a percentile counts as significant (0: no minimum).

    Per the docs: fewer than 10/(1-p) samples for 0.5 <= p < 1, fewer than 10/p for 0 < p < 0.5.
    """
    p = _percentile(statistic)
    if p is None or p <= 0 or p >= 100:
        return 0
    fraction = Fraction(p) / 100
    needed = 10 / (1 - fraction) if fraction >= Fraction(1, 2) else 10 / fraction
    return math.ceil(needed)


def _member(enum: type[_E], raw: object, what: str) -> _E:
    """``enum(raw)`` with an error that names the field and the allowed values."""
    try:
        return enum(raw)  # type: ignore[arg-type]  # a lookup by value: any object, ValueError if none
    except ValueError:
        allowed = ", ".join(member.value for member in enum)
        raise ValueError(f"{what} {raw!r} is not one of: {allowed}") from None


def _check_period(period_seconds: int) -> None:
    if isinstance(period_seconds, bool) or not isinstance(period_seconds, int):
        raise ValueError(f"period must be an int of seconds, got {period_seconds!r}")
    if period_seconds not in (10, 30) and (period_seconds <= 0 or period_seconds % 60):
        raise ValueError(
            f"period {period_seconds}s is not valid: CloudWatch allows 10, 30 (high resolution) "
            "or a positive multiple of 60"
        )


@dataclass(frozen=True)
class AlarmRule:
    """The parts of a metric alarm that decide its state."""

    name: str
    statistic: str
    period_seconds: int
    evaluation_periods: int
    datapoints_to_alarm: int
    threshold: float
    comparison: Comparison
    treat_missing_data: TreatMissingData = TreatMissingData.MISSING
    evaluate_low_sample_count_percentile: LowSampleCountPercentile = LowSampleCountPercentile.EVALUATE
    fill: float | None = None  # FILL(m, fill) metric math over the metric (module docstring, 9.)
    math: Queries | None = None  # any other metric math (module docstring, 10.)

    def __post_init__(self) -> None:
        # Coerce CloudWatch strings to enums so a typo fails here, not mid-evaluation.
        for attr, enum in (
            ("comparison", Comparison),
            ("treat_missing_data", TreatMissingData),
            ("evaluate_low_sample_count_percentile", LowSampleCountPercentile),
        ):
            object.__setattr__(self, attr, _member(enum, getattr(self, attr), f"alarm {self.name!r}: {attr}"))
        if not self.name:
            raise ValueError("alarm name must not be empty")
        _percentile(self.statistic)
        _check_period(self.period_seconds)
        if self.evaluation_periods < 1:
            raise ValueError(f"alarm {self.name!r}: evaluation_periods must be >= 1")
        if not 1 <= self.datapoints_to_alarm <= self.evaluation_periods:
            raise ValueError(
                f"alarm {self.name!r}: datapoints_to_alarm ({self.datapoints_to_alarm}) must be "
                f"between 1 and evaluation_periods ({self.evaluation_periods})"
            )
        threshold = float(self.threshold)
        if not math.isfinite(threshold):
            raise ValueError(f"alarm {self.name!r}: threshold must be a finite number")
        object.__setattr__(self, "threshold", threshold)

    @property
    def is_percentile(self) -> bool:
        return _percentile(self.statistic) is not None

    @classmethod
    def from_put_metric_alarm(cls, props: Mapping[str, Any]) -> AlarmRule:
        """Build from boto3 ``put_metric_alarm`` kwargs or a ``describe_alarms`` MetricAlarm
        (a single metric, or ``Metrics`` holding one metric and ``FILL`` of it)."""
        name = props.get("AlarmName") or "<unnamed>"
        fill: float | None = None
        math_queries: Queries | None = None
        if props.get("EvaluationWindow") and "WallClockWindow" in props["EvaluationWindow"]:
            raise ValueError(f"alarm {name!r}: a WallClockWindow evaluation window is not evaluated offline")
        if props.get("Metrics"):
            stat_name, period, fill, math_queries = _math_parts(name, props)
            props = {**props, "Statistic": stat_name, "Period": period}
            if _percentile(stat_name) is not None:
                props = {**props, "Statistic": None, "ExtendedStatistic": stat_name}
        statistic, extended = props.get("Statistic"), props.get("ExtendedStatistic")
        if statistic and extended:
            raise ValueError(f"alarm {name!r}: give Statistic or ExtendedStatistic, not both")
        if not (statistic or extended):
            raise ValueError(f"alarm {name!r}: Statistic or ExtendedStatistic is required")
        required = ("AlarmName", "Period", "EvaluationPeriods", "Threshold", "ComparisonOperator")
        missing = [key for key in required if props.get(key) is None]
        if missing:
            raise ValueError(f"alarm {name!r}: missing {', '.join(missing)}")
        comparison = props["ComparisonOperator"]
        if comparison not in {member.value for member in Comparison}:
            raise ValueError(
                f"alarm {name!r}: ComparisonOperator {comparison!r} is not supported "
                "(anomaly-detection bands are not evaluated)"
            )
        evaluation_periods = int(props["EvaluationPeriods"])
        return cls(
            name=props["AlarmName"],
            statistic=str(statistic or extended),
            period_seconds=int(props["Period"]),
            evaluation_periods=evaluation_periods,
            datapoints_to_alarm=int(props.get("DatapointsToAlarm") or evaluation_periods),
            threshold=float(props["Threshold"]),
            comparison=Comparison(comparison),
            treat_missing_data=_member(
                TreatMissingData,
                props.get("TreatMissingData") or "missing",
                f"alarm {name!r}: TreatMissingData",
            ),
            evaluate_low_sample_count_percentile=_member(
                LowSampleCountPercentile,
                props.get("EvaluateLowSampleCountPercentile") or "evaluate",
                f"alarm {name!r}: EvaluateLowSampleCountPercentile",
            ),
            fill=fill,
            math=math_queries,
        )


def _math_parts(name: str, props: Mapping[str, Any]) -> tuple[str, int, float | None, Queries | None]:
    """(statistic, period, FILL value, other metric math) of an alarm's ``Metrics``: one metric
    and FILL of it (9.) gives a fill value, anything else parsed metric math (10.)."""
    try:
        stat, fill = math_metric(props)
    except ValueError:
        try:
            queries = parse_queries(name, list(props["Metrics"]))
        except MetricMathError as exc:
            raise ValueError(f"{exc} (metric-math alarms: see alarms.metric_math for the grammar)") from None
        first = queries.stats[0]
        return first.statistic, first.period_seconds, None, queries
    return str(stat["Stat"]), int(stat["Period"]), fill, None


def math_metric(props: Mapping[str, Any]) -> tuple[dict[str, Any], float]:
    """(the MetricStat, the fill value) of a metric-math alarm whose ``Metrics`` are one metric
    and ``FILL(<its id>, <number>)`` returning data; ValueError for any other expression."""
    name = props.get("AlarmName") or "<unnamed>"
    queries = list(props.get("Metrics") or [])
    stats = [query for query in queries if query.get("MetricStat")]
    returned = [query for query in queries if query.get("ReturnData", True) and query.get("Expression")]
    match = _FILL.fullmatch(returned[0]["Expression"]) if len(returned) == 1 else None
    if len(queries) != 2 or len(stats) != 1 or match is None or match.group(1) != stats[0].get("Id"):
        raise ValueError(
            f"alarm {name!r}: metric-math alarms (Metrics) are supported only as one metric and "
            "FILL(<its id>, <number>) returning data"
        )
    stat = dict(stats[0]["MetricStat"])
    if stat.get("Period") is None or not stat.get("Stat"):
        raise ValueError(f"alarm {name!r}: its MetricStat needs a Period and a Stat")
    return stat, float(match.group(2))


def watched_metric(props: Mapping[str, Any]) -> dict[str, Any]:
    """Namespace, MetricName, Dimensions (and Unit when set) of the metric an alarm watches,
    whether it names the metric itself or through ``FILL`` metric math."""
    if props.get("Metrics"):
        stat, _fill = math_metric(props)
        metric = stat.get("Metric", {})
        found = {key: metric.get(key) for key in ("Namespace", "MetricName")}
        found["Dimensions"] = list(metric.get("Dimensions") or [])
        unit = stat.get("Unit")
    else:
        found = {key: props.get(key) for key in ("Namespace", "MetricName")}
        found["Dimensions"] = list(props.get("Dimensions") or [])
        unit = props.get("Unit")
    return found | ({"Unit": unit} if unit else {})


@dataclass(frozen=True)
class Sample:
    """One raw observation; ``count`` equal values at once (PutMetricData Values + Counts)."""

    timestamp: datetime
    value: float
    count: float = 1

    def __post_init__(self) -> None:
        if not math.isfinite(self.value):
            raise ValueError(f"sample value must be finite, got {self.value!r}")
        if not (math.isfinite(self.count) and self.count > 0):
            raise ValueError(f"sample count must be a positive number, got {self.count!r}")


@dataclass(frozen=True)
class Evaluated:
    """One period the verdict rests on: its start, its value, and how it counted.

    ``value`` is None for a missing period that was filled; ``breaching`` is then what the
    TreatMissingData setting made of it, or None when it stays unknown (missing / ignore).
    """

    timestamp: datetime
    value: float | None
    breaching: bool | None


@dataclass(frozen=True)
class Verdict:
    """The state CloudWatch would set, why, and on which datapoints (newest first)."""

    state: AlarmState
    reason: str
    datapoints: tuple[Evaluated, ...]
    changed: bool


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _period_start(moment: datetime, period_seconds: int) -> datetime:
    """Start of the epoch-aligned period holding ``moment``."""
    delta = _utc(moment) - _EPOCH
    seconds = delta.days * 86_400 + delta.seconds
    return _EPOCH + timedelta(seconds=seconds - seconds % period_seconds)


def _window_end(period_seconds: int, now: datetime) -> datetime:
    """Where the newest evaluated period ends: ``now`` rounded down to the evaluation step, or to
    the period when it is shorter (8.)."""
    return _period_start(now, min(period_seconds, SLIDING_STEP_SECONDS))


def _slot(moment: datetime, end: datetime, period_seconds: int) -> datetime:
    """Start of the period holding ``moment`` among the periods that end at ``end``."""
    offset = (_utc(moment) - end).total_seconds()
    return end + timedelta(seconds=math.floor(offset / period_seconds) * period_seconds)


def _range_periods(rule: AlarmRule, range_periods: int | None) -> int:
    if range_periods is None:
        return rule.evaluation_periods + EXTRA_RANGE_PERIODS
    if range_periods < rule.evaluation_periods:
        raise ValueError(f"range_periods ({range_periods}) must be >= evaluation_periods")
    return range_periods


def evaluation_window(
    rule: AlarmRule, now: datetime, *, range_periods: int | None = None
) -> tuple[datetime, datetime]:
    """[start, end) of the evaluation range: the periods of the sliding window at ``now`` (8.).

    This is the window to fetch (GetMetricData StartTime/EndTime) before calling ``evaluate``.
    """
    end = _window_end(rule.period_seconds, now)
    count = _range_periods(rule, range_periods)
    return end - timedelta(seconds=rule.period_seconds * count), end


def _buckets(
    samples: Iterable[Sample], period_seconds: int, start: datetime, end: datetime, *, sliding: bool = True
) -> dict[datetime, list[tuple[float, float]]]:
    """Samples in [start, end) by period: periods ending at ``end`` (sliding) or epoch-aligned."""
    start, end = _utc(start), _utc(end)
    anchor = end if sliding else _EPOCH
    buckets: dict[datetime, list[tuple[float, float]]] = {}
    for sample in samples:
        moment = _utc(sample.timestamp)
        if start <= moment < end:
            buckets.setdefault(_slot(moment, anchor, period_seconds), []).append((sample.value, sample.count))
    return dict(sorted(buckets.items()))


def _nearest_rank(values: list[tuple[float, float]], p: Decimal) -> float:
    ordered = sorted(values)
    target = Fraction(p) / 100 * sum(Fraction(count) for _, count in ordered)
    seen = Fraction(0)
    for value, count in ordered:
        seen += Fraction(count)
        if seen >= target:
            return value
    return ordered[-1][0]  # pragma: no cover - seen reaches the total


def _statistic(statistic: str, values: list[tuple[float, float]]) -> float:
    total = sum(count for _, count in values)
    match statistic:
        case "SampleCount":
            return float(total)
        case "Sum":
            return math.fsum(value * count for value, count in values)
        case "Average":
            return math.fsum(value * count for value, count in values) / total
        case "Minimum":
            return min(value for value, _ in values)
        case "Maximum":
            return max(value for value, _ in values)
    p = _percentile(statistic)
    assert p is not None
    return _nearest_rank(values, p)


def aggregate(
    samples: Iterable[Sample], statistic: str, period_seconds: int, start: datetime, end: datetime
) -> dict[datetime, float]:
    """One datapoint per epoch-aligned period holding a sample in [start, end).

    Periods without a sample are absent: that absence is what alarms call "missing". A period cut
    by ``start``/``end`` only sees the samples inside them, so pass period-aligned bounds.
    """
    _percentile(statistic)
    _check_period(period_seconds)
    return {
        moment: _statistic(statistic, values)
        for moment, values in _buckets(samples, period_seconds, start, end, sliding=False).items()
    }


def aggregate_window(
    samples: Iterable[Sample], statistic: str, period_seconds: int, start: datetime, end: datetime
) -> dict[datetime, float]:
    """As ``aggregate``, with the periods counted back from ``end``: a sliding window's (8.)."""
    _percentile(statistic)
    _check_period(period_seconds)
    return {
        moment: _statistic(statistic, values)
        for moment, values in _buckets(samples, period_seconds, start, end).items()
    }


def _aligned(
    points: Mapping[datetime, float], period_seconds: int, end: datetime, what: str
) -> dict[datetime, float]:
    out: dict[datetime, float] = {}
    for moment, value in points.items():
        start = _slot(moment, end, period_seconds)
        if start in out:
            raise ValueError(f"two {what} fall in the period starting {start.isoformat()}")
        out[start] = float(value)
    return out


Stamp = Callable[[datetime], str]


def cloudwatch_stamp(moment: datetime) -> str:
    """A period's start as CloudWatch's StateReason writes it: 15/01/24 10:30:00."""
    return f"{_utc(moment):%d/%m/%y %H:%M:%S}"


def _datapoints_phrase(listed: list[Evaluated], evaluation_periods: int, stamp: Stamp) -> str:
    """'1 datapoint [..] was' / '2 out of the last 3 datapoints [..] were'."""
    shown = ", ".join(f"{point.value!r} ({stamp(point.timestamp)})" for point in listed)
    verb = "was" if len(listed) == 1 else "were"
    if evaluation_periods == 1:
        return f"{len(listed)} datapoint [{shown}] {verb}"
    return f"{len(listed)} out of the last {evaluation_periods} datapoints [{shown}] {verb}"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _threshold_reason(rule: AlarmRule, evaluated: list[Evaluated], state: AlarmState, stamp: Stamp) -> str:
    """CloudWatch-style 'Threshold Crossed: ...' for a count-decided ALARM or OK."""
    alarming = state is AlarmState.ALARM
    decisive = [point for point in evaluated if point.breaching is alarming]
    real = [point for point in decisive if point.value is not None]
    filled = len(decisive) - len(real)
    treated = "Breaching" if alarming else "NonBreaching"
    negation = "" if alarming else "not "
    comparison = f"{negation}{rule.comparison.phrase} the threshold ({rule.threshold!r})"
    if not real:
        return (
            f"Threshold Crossed: no datapoints were received for {_plural(filled, 'period')} and "
            f"{_plural(filled, 'missing datapoint')} {'was' if filled == 1 else 'were'} treated as [{treated}]."
        )
    reason = f"Threshold Crossed: {_datapoints_phrase(real, rule.evaluation_periods, stamp)} {comparison}"
    if filled:
        reason += f" and {_plural(filled, 'missing datapoint')} {'was' if filled == 1 else 'were'} treated as [{treated}]"
    return reason + "."


def _retain(previous: AlarmState, why: str) -> tuple[AlarmState, str]:
    return previous, f"{why}; state kept at {previous.value}."


def evaluate(
    rule: AlarmRule,
    datapoints: Mapping[datetime, float],
    now: datetime,
    previous: AlarmState = AlarmState.INSUFFICIENT_DATA,
    *,
    sample_counts: Mapping[datetime, float] | None = None,
    range_periods: int | None = None,
    stamp: Stamp = cloudwatch_stamp,
) -> Verdict:
    """The state CloudWatch would give ``rule`` at ``now`` over per-period ``datapoints``.

    ``datapoints`` maps a period (any moment inside it) to its statistic value; absent periods
    are missing. ``sample_counts`` (per period) is only needed for the low-sample percentile
    check; without it that check is skipped. ``stamp`` writes a period's start in the reason
    (a time-scaled sandbox shows the wall-clock time too). See the module docstring.
    """
    previous = AlarmState(previous)
    period = timedelta(seconds=rule.period_seconds)
    start, end = evaluation_window(rule, now, range_periods=range_periods)
    slots = [end - period * (i + 1) for i in range((end - start) // period)]  # newest first
    values = _aligned(datapoints, rule.period_seconds, end, "datapoints")
    if rule.fill is not None and any(t in values for t in slots):
        values = {t: values.get(t, rule.fill) for t in slots}  # FILL: a value in every period
    evaluated, real_count = _evaluated_points(rule, values, slots)
    state, reason = _decide(
        rule, evaluated, real_count=real_count, range_count=len(slots), previous=previous, stamp=stamp
    )
    thin = _thin_periods(rule, evaluated, sample_counts, end)
    if thin:
        state, reason = _retain(
            previous,
            f"Low sample count: {_plural(thin, 'period')} had fewer than {minimum_samples(rule.statistic)} "
            f"samples for {rule.statistic} and EvaluateLowSampleCountPercentile is ignore",
        )
    return Verdict(state=state, reason=reason, datapoints=tuple(evaluated), changed=state is not previous)


def _evaluated_points(
    rule: AlarmRule, values: Mapping[datetime, float], slots: list[datetime]
) -> tuple[list[Evaluated], int]:
    """The N periods evaluated, newest first, and how many of the range's periods have data.

    The most recent N with data; when fewer have data, the shortfall is filled from the most
    recent missing periods, as TreatMissingData says (breaching, not breaching, or neither)."""
    n = rule.evaluation_periods
    real = [
        Evaluated(t, values[t], rule.comparison.breaches(values[t], rule.threshold))
        for t in slots
        if t in values
    ]
    if len(real) >= n:
        return real[:n], len(real)
    fill_as = {
        TreatMissingData.BREACHING: True,
        TreatMissingData.NOT_BREACHING: False,
    }.get(rule.treat_missing_data)
    gaps = [Evaluated(t, None, fill_as) for t in slots if t not in values][: n - len(real)]
    return sorted(real + gaps, key=lambda point: point.timestamp, reverse=True), len(real)


def _thin_periods(
    rule: AlarmRule, evaluated: list[Evaluated], sample_counts: Mapping[datetime, float] | None, end: datetime
) -> int:
    """How many evaluated periods have too few samples for a percentile that ignores them
    (0 when the check does not apply, or no sample counts were given)."""
    if (
        sample_counts is None
        or not rule.is_percentile
        or rule.evaluate_low_sample_count_percentile is not LowSampleCountPercentile.IGNORE
    ):
        return 0
    counts = _aligned(sample_counts, rule.period_seconds, end, "sample counts")
    needed = minimum_samples(rule.statistic)
    return sum(
        1 for p in evaluated if p.value is not None and p.timestamp in counts and counts[p.timestamp] < needed
    )


def _decide(
    rule: AlarmRule,
    evaluated: list[Evaluated],
    *,
    real_count: int,
    range_count: int,
    previous: AlarmState,
    stamp: Stamp,
) -> tuple[AlarmState, str]:
    n, m = rule.evaluation_periods, rule.datapoints_to_alarm
    breaching = sum(1 for point in evaluated if point.breaching)
    if real_count >= n or rule.treat_missing_data in (
        TreatMissingData.BREACHING,
        TreatMissingData.NOT_BREACHING,
    ):
        state = AlarmState.ALARM if breaching >= m else AlarmState.OK
        return state, _threshold_reason(rule, evaluated, state, stamp)

    # `missing` / `ignore` with fewer than N real datapoints: only real data can decide.
    ignore = rule.treat_missing_data is TreatMissingData.IGNORE
    if real_count == 0:
        why = f"no datapoints were received for the last {_plural(range_count, 'period')}"
        if ignore:
            return _retain(previous, f"Missing data ignored: {why}")
        return AlarmState.INSUFFICIENT_DATA, f"Insufficient Data: {why}."
    if breaching >= m:
        return AlarmState.ALARM, _threshold_reason(rule, evaluated, AlarmState.ALARM, stamp)
    if any(point.breaching is False for point in evaluated):
        return AlarmState.OK, _threshold_reason(rule, evaluated, AlarmState.OK, stamp)

    # Only breaching real datapoints, fewer than M: the premature-alarm rule decides.
    oldest = max(index for index, point in enumerate(evaluated, start=1) if point.breaching)
    real = [point for point in evaluated if point.value is not None]
    seen = f"{_datapoints_phrase(real, n, stamp)} {rule.comparison.phrase} the threshold ({rule.threshold!r})"
    if oldest >= m:
        why = (
            f"Threshold Crossed: {seen} and every more recent period is breaching or missing "
            f"(the oldest breaching datapoint is {oldest} of the last {n} evaluated, at least {m})"
        )
        if ignore:
            return _retain(previous, f"Missing data ignored: {why}")
        return AlarmState.ALARM, why + "."
    why = f"{seen}, too recent to confirm ALARM with {_plural(n - real_count, 'missing datapoint')}"
    if ignore:
        return _retain(previous, f"Missing data ignored: {why}")
    return AlarmState.INSUFFICIENT_DATA, f"Insufficient Data: {why}."


def evaluate_samples(
    rule: AlarmRule,
    samples: Iterable[Sample],
    now: datetime,
    previous: AlarmState = AlarmState.INSUFFICIENT_DATA,
    *,
    range_periods: int | None = None,
    stamp: Stamp = cloudwatch_stamp,
) -> Verdict:
    """Aggregate raw samples over the evaluation range, then ``evaluate``."""
    start, end = evaluation_window(rule, now, range_periods=range_periods)
    buckets = _buckets(samples, rule.period_seconds, start, end)
    datapoints = {moment: _statistic(rule.statistic, values) for moment, values in buckets.items()}
    counts = {moment: float(sum(count for _, count in values)) for moment, values in buckets.items()}
    return evaluate(
        rule, datapoints, now, previous, sample_counts=counts, range_periods=range_periods, stamp=stamp
    )


def _require_math(rule: AlarmRule) -> Queries:
    if rule.math is None:
        raise ValueError(f"alarm {rule.name!r} is not a metric-math alarm: use evaluate / evaluate_samples")
    return rule.math


def evaluate_math(
    rule: AlarmRule,
    datapoints: Mapping[str, Mapping[datetime, float]],
    now: datetime,
    previous: AlarmState = AlarmState.INSUFFICIENT_DATA,
    *,
    range_periods: int | None = None,
    stamp: Stamp = cloudwatch_stamp,
) -> Verdict:
    """The state of a metric-math alarm (10.) given each MetricStat query's datapoints, by its
    Id (a period -- any moment inside it -- to its statistic value; absent periods are missing)."""
    queries = _require_math(rule)
    start, end = evaluation_window(rule, now, range_periods=range_periods)
    slots = [
        start + timedelta(seconds=rule.period_seconds * i)
        for i in range((end - start) // timedelta(seconds=rule.period_seconds))
    ]
    series = {
        query.id: {
            t: v
            for t, v in _aligned(datapoints.get(query.id, {}), rule.period_seconds, end, query.id).items()
            if start <= t < end
        }
        for query in queries.stats
    }
    try:
        returned = evaluate_queries(queries, series, slots)
    except MetricMathError as exc:
        raise ValueError(f"alarm {rule.name!r}: {exc}") from None
    return evaluate(rule, returned, now, previous, range_periods=range_periods, stamp=stamp)


def evaluate_math_samples(
    rule: AlarmRule,
    samples: Mapping[str, Iterable[Sample]],
    now: datetime,
    previous: AlarmState = AlarmState.INSUFFICIENT_DATA,
    *,
    range_periods: int | None = None,
    stamp: Stamp = cloudwatch_stamp,
) -> Verdict:
    """Aggregate each MetricStat query's raw samples (by its Id) with its own Stat over the
    evaluation range, then ``evaluate_math``."""
    queries = _require_math(rule)
    start, end = evaluation_window(rule, now, range_periods=range_periods)
    datapoints = {
        query.id: aggregate_window(
            samples.get(query.id, ()), query.statistic, rule.period_seconds, start, end
        )
        for query in queries.stats
    }
    return evaluate_math(rule, datapoints, now, previous, range_periods=range_periods, stamp=stamp)


def replay(
    rule: AlarmRule,
    samples: Mapping[str, Iterable[Sample]] | Iterable[Sample],
    moments: Iterable[datetime],
    previous: AlarmState = AlarmState.INSUFFICIENT_DATA,
) -> list[Verdict]:
    """The verdicts CloudWatch would give at each of ``moments`` (in order), each evaluation
    starting from the previous one's state: raw samples by MetricStat Id for a metric-math
    alarm, a plain list of samples for any other."""
    kept: Mapping[str, list[Sample]] | list[Sample]
    kept = {k: list(v) for k, v in samples.items()} if isinstance(samples, Mapping) else list(samples)
    verdicts: list[Verdict] = []
    for moment in moments:
        if rule.math is not None:
            if not isinstance(kept, Mapping):
                raise ValueError(f"alarm {rule.name!r}: give a metric-math alarm's samples by query Id")
            verdict = evaluate_math_samples(rule, kept, moment, previous)
        else:
            if isinstance(kept, Mapping):
                raise ValueError(f"alarm {rule.name!r}: give a single-metric alarm's samples as a list")
            verdict = evaluate_samples(rule, kept, moment, previous)
        verdicts.append(verdict)
        previous = verdict.state
    return verdicts
