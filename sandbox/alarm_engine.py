"""CloudWatch alarm evaluation for the sandbox: alarms move, and notify, as AWS would move them.

moto stores alarms (PutMetricAlarm) but never evaluates them: a new alarm sits in OK with
"Unchecked: Initial alarm creation" forever, and SetAlarmState fires no action. `AlarmEngine`
does what CloudWatch does, every virtual minute:

1. Reads every alarm (metric and composite) from moto's backend *in this process*
   (`cloudwatch_backends[account][region].alarms`, shaped as DescribeAlarms shows them by
   `alarm_description`): CloudWatch reads its own alarms, not through its API, and a
   DescribeAlarms round trip every virtual minute was the engine's main cost.
2. For each metric alarm, reads the raw datapoints of exactly its metric (namespace, name, the
   exact dimension set, and its Unit when the alarm names one) from the same backend
   (`metric_data`, indexed as it grows; the account is the alarm ARN's), turns them into
   `alarms.evaluate.Sample`s and judges them with `alarms.evaluate` (see `datum_samples` for how a
   StatisticValues datum becomes a sample). A verdict depends only on the alarm, its state, its
   metric's datapoints and the evaluation window (whole periods): an alarm none of which changed
   since its last evaluation is not judged again (its verdict would be the same).
3. On a state change: moto's SetAlarmState (its backend's, as step 1) with a CloudWatch-like
   StateReason and StateReasonData, then publishes CloudWatch's alarm notification (the
   documented SNS message: AlarmName, ..., Trigger{...}; Subject `ALARM: "name" in US East (N.
   Virginia)`) to every SNS topic among the new state's actions (AlarmActions, OKActions,
   InsufficientDataActions) when ActionsEnabled, straight into moto's SNS backend (CloudWatch
   is a service delivering to a topic, not an API caller). moto's SNS delivers it to subscribed
   queues.
4. Composite alarms: their AlarmRule is parsed (`parse_alarm_rule`: ALARM/OK/INSUFFICIENT_DATA
   of a name, a quoted name or an ARN; NOT, AND, OR, parentheses, TRUE, FALSE) and evaluated
   after the metric alarms, over the states just set (composites of composites in dependency
   order; a cycle is left alone). TRUE -> ALARM, FALSE -> OK. Their changes notify too, with
   AlarmRule and TriggeringChildren instead of Trigger.

What AWS does at creation, the engine does at an alarm's first evaluation: moto's initial
"Unchecked" OK counts as INSUFFICIENT_DATA (AWS's initial state). Staying INSUFFICIENT_DATA is
no transition (the state is set silently, no action); leaving it is, and notifies. moto resets an
alarm to that Unchecked OK when PutMetricAlarm updates it; AWS keeps the state: the engine then
continues from the state it last gave the alarm.

Metric-math alarms are evaluated: `FILL(<its id>, <n>)` of one metric (`alarms.evaluate`, 9.) as
that metric's datapoints, and any expression of the `alarms.metric_math` grammar (10.) by
aggregating each MetricStat query over the evaluation range's periods with its own Stat and
dimensions, then `alarms.evaluate.evaluate_math`. Windows slide (`alarms.evaluate`, 8.): a 1-day
period is re-aggregated every virtual minute, so Sum, SampleCount and Average come from running
totals the index keeps per metric (`_Prefix`: two bisections per period, not a day of datapoints
re-read); other statistics read the range's datapoints. Left alone, logged once at INFO: alarms
that cannot be evaluated offline (functions outside that grammar, anomaly detection bands,
unknown statistics), composite rules outside the grammar (AT_LEAST),
and actions that are not SNS topics (Lambda, Auto Scaling, EC2, Systems Manager).
CloudWatch treats missing data of every AWS/DynamoDB alarm as `ignore`, whatever is configured:
so does the engine.

**Time scale.** The sandbox runs its waits shortened by a `TimeScale` factor f (0.05: a 300 s
wait lasts 15 real s); the metrics its parts publish carry real timestamps. Alarms are written
for AWS (Period 300, 3 evaluation periods), so the engine evaluates them in *virtual* time:

    virtual(t) = origin + (t - origin) / f        (origin: when the engine was created)

applied to every sample's timestamp and to `now`; the rule itself is evaluated unchanged. With
f = 0.05, samples spread over the 15 real seconds after the origin land in the 300 virtual
seconds after it: five 60 s periods. Periods end at the virtual minute (a sliding window). The
engine ticks every `time_scale.scale(60)` real seconds (each virtual minute, as CloudWatch
evaluates), configurable with `interval=`; `evaluate_now()` runs one pass synchronously.
StateReason names each period by its wall-clock start, with the virtual one beside it when they
differ ("5.0 (03/12/26 06:12:15, virtual 03/12/26 10:55:00)"): an on-call reader compares it with
the clock on the wall. StateReasonData speaks virtual time (the periods evaluated); the
notification's StateChangeTime is the real moment of the change, as moto's StateUpdatedTimestamp.
`clock_info()` gives the origin and factor, so that `pipeops alarms check` (another process, through
the served sandbox's `/_sandbox/clock`) judges on the same clock.

The backend is read in-process: the sandbox's moto (a `mock_aws` or a `ThreadedMotoServer`)
lives in this process. Pointed at a moto in another process, the engine would see no data.
The background thread never raises: a failed pass is logged at WARNING and the next one runs.
"""

from __future__ import annotations

import bisect
import json
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from alarms.evaluate import (
    AlarmRule,
    AlarmState,
    Sample,
    TreatMissingData,
    Verdict,
    aggregate_window,
    cloudwatch_stamp,
    evaluate_math,
    evaluate_samples,
    evaluation_window,
    watched_metric,
)
from alarms.live import shorten
from alarms.metric_math import StatQuery
from sandbox.background import Periodic
from sandbox.clock import TimeScale
from sandbox.seams import composite_alarms

LOG = logging.getLogger("sandbox.alarm_engine")

UNCHECKED_REASON = "Unchecked: Initial alarm creation"  # moto's initial StateReason (state OK)
VIRTUAL_MINUTE = 60.0
SUBJECT_MAX = 100  # SNS rejects longer subjects
STATE_REASON_MAX = 1023  # SetAlarmState limits
STATE_REASON_DATA_MAX = 4000
IGNORE_MISSING_NAMESPACES = frozenset({"AWS/DynamoDB"})
_STATISTIC_NAMES = {
    "SampleCount": "SAMPLE_COUNT",
    "Average": "AVERAGE",
    "Sum": "SUM",
    "Minimum": "MINIMUM",
    "Maximum": "MAXIMUM",
}

__all__ = [
    "AlarmEngine",
    "Transition",
    "datum_samples",
    "evaluate_alarm_rule",
    "parse_alarm_rule",
    "rule_alarm_names",
    "to_real",
    "to_virtual",
]


# --------------------------------------------------------------------------- virtual time


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def to_virtual(moment: datetime, origin: datetime, time_scale: TimeScale) -> datetime:
    """Real moment -> the virtual moment it stands for: origin + (moment - origin) / factor."""
    origin = _utc(origin)
    return origin + (_utc(moment) - origin) / time_scale.factor


def to_real(moment: datetime, origin: datetime, time_scale: TimeScale) -> datetime:
    """Inverse of `to_virtual`."""
    origin = _utc(origin)
    return origin + (_utc(moment) - origin) * time_scale.factor


def wall_clock_stamp(virtual: datetime, origin: datetime, time_scale: TimeScale) -> str:
    """'03/12/26 06:12:15, virtual 03/12/26 10:55:00' (just the first when time is not scaled)."""
    real = cloudwatch_stamp(to_real(virtual, origin, time_scale))
    shown = cloudwatch_stamp(virtual)
    return real if shown == real else f"{real}, virtual {shown}"


# --------------------------------------------------------------------------- composite rules


class AlarmRuleSyntaxError(ValueError):
    """An AlarmRule outside the grammar the sandbox evaluates."""


@dataclass(frozen=True)
class StateIs:
    """ALARM("name"), OK("name"), INSUFFICIENT_DATA("name"): the named alarm is in `state`."""

    state: AlarmState
    alarm: str  # the alarm's name (an ARN is reduced to its name)


@dataclass(frozen=True)
class Constant:
    value: bool


@dataclass(frozen=True)
class Not:
    operand: RuleNode


@dataclass(frozen=True)
class And:
    operands: tuple[RuleNode, ...]


@dataclass(frozen=True)
class Or:
    operands: tuple[RuleNode, ...]


RuleNode = StateIs | Constant | Not | And | Or
_FUNCTIONS = {state.value: state for state in AlarmState}


def alarm_name_of(reference: str) -> str:
    """An alarm ARN (arn:aws:cloudwatch:region:account:alarm:name) -> name; a name is kept."""
    if reference.startswith("arn:") and ":alarm:" in reference:
        return reference.split(":alarm:", 1)[1]
    return reference


class _RuleParser:
    """Recursive descent over: or := and (OR and)*; and := not (AND not)*; not := NOT not | atom;
    atom := ( or ) | TRUE | FALSE | FUNCTION ( name ). NOT binds tightest, then AND, then OR."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, message: str) -> AlarmRuleSyntaxError:
        return AlarmRuleSyntaxError(f"AlarmRule {self.text!r}: {message} at position {self.pos}")

    def parse(self) -> RuleNode:
        node = self.or_()
        self.skip_space()
        if self.pos != len(self.text):
            raise self.fail(f"unexpected {self.text[self.pos :]!r}")
        return node

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek_word(self) -> str:
        self.skip_space()
        end = self.pos
        while end < len(self.text) and (self.text[end].isalnum() or self.text[end] == "_"):
            end += 1
        return self.text[self.pos : end]

    def keyword(self, word: str) -> bool:
        if self.peek_word() == word:
            self.pos += len(word)
            return True
        return False

    def expect(self, char: str) -> None:
        self.skip_space()
        if not self.text.startswith(char, self.pos):
            raise self.fail(f"expected {char!r}")
        self.pos += 1

    def or_(self) -> RuleNode:
        operands = [self.and_()]
        while self.keyword("OR"):
            operands.append(self.and_())
        return operands[0] if len(operands) == 1 else Or(tuple(operands))

    def and_(self) -> RuleNode:
        operands = [self.not_()]
        while self.keyword("AND"):
            operands.append(self.not_())
        return operands[0] if len(operands) == 1 else And(tuple(operands))

    def not_(self) -> RuleNode:
        if self.keyword("NOT"):
            return Not(self.not_())
        return self.atom()

    def atom(self) -> RuleNode:
        self.skip_space()
        if self.text.startswith("(", self.pos):
            self.pos += 1
            node = self.or_()
            self.expect(")")
            return node
        word = self.peek_word()
        if word in ("TRUE", "FALSE"):
            self.pos += len(word)
            return Constant(word == "TRUE")
        if word in _FUNCTIONS:
            self.pos += len(word)
            self.expect("(")
            name = self.alarm_reference()
            self.expect(")")
            return StateIs(_FUNCTIONS[word], alarm_name_of(name))
        if word:
            raise self.fail(f"unsupported function or keyword {word!r}")
        if self.pos >= len(self.text):
            raise self.fail("unexpected end")
        raise self.fail(f"unexpected {self.text[self.pos]!r}")

    def alarm_reference(self) -> str:
        self.skip_space()
        if self.text.startswith('"', self.pos):
            end = self.text.find('"', self.pos + 1)
            if end < 0:
                raise self.fail("unterminated quoted alarm name")
            name = self.text[self.pos + 1 : end]
            self.pos = end + 1
        else:
            end = self.text.find(")", self.pos)
            if end < 0:
                raise self.fail("expected ')'")
            name = self.text[self.pos : end].strip()
            self.pos = end
        if not name:
            raise self.fail("empty alarm name")
        return name


def parse_alarm_rule(text: str) -> RuleNode:
    """Parse a composite alarm's AlarmRule (the subset above); AlarmRuleSyntaxError otherwise."""
    if not text or not text.strip():
        raise AlarmRuleSyntaxError("AlarmRule is empty")
    return _RuleParser(text).parse()


def evaluate_alarm_rule(rule: RuleNode, states: Mapping[str, AlarmState | str]) -> bool:
    """The rule's truth over alarm states by name (an alarm not in `states` is in no state)."""
    match rule:
        case StateIs(state, alarm):
            return alarm in states and AlarmState(states[alarm]) is state
        case Constant(value):
            return value
        case Not(operand):
            return not evaluate_alarm_rule(operand, states)
        case And(operands):
            return all(evaluate_alarm_rule(operand, states) for operand in operands)
        case Or(operands):
            return any(evaluate_alarm_rule(operand, states) for operand in operands)
    raise TypeError(f"not a rule node: {rule!r}")  # pragma: no cover


def _atoms(rule: RuleNode) -> list[StateIs]:
    match rule:
        case StateIs():
            return [rule]
        case Not(operand):
            return _atoms(operand)
        case And(operands) | Or(operands):
            return [atom for operand in operands for atom in _atoms(operand)]
    return []


def rule_alarm_names(rule: RuleNode) -> list[str]:
    """The alarms a rule refers to, in order, once each."""
    return list(dict.fromkeys(atom.alarm for atom in _atoms(rule)))


# --------------------------------------------------------------------------- metric data


def datum_samples(datum: Any, statistic: str) -> list[Sample]:
    """moto's stored datapoint -> the samples it stands for (timestamps as stored: real).

    A `MetricDatum` (one Value; Values x Counts are stored by moto as repeated datums) is one
    sample. A `MetricAggregatedDatum` (StatisticValues: Sum, Minimum, Maximum, SampleCount) is
    one sample of weight SampleCount whose value keeps the alarm's statistic exact: sum/count for
    Sum, Average and SampleCount; Minimum for Minimum; Maximum for Maximum. Percentiles cannot be
    computed from a statistic set (CloudWatch reports none for such data): it gives no sample
    for a percentile, nor when its SampleCount is not positive.
    """
    timestamp = _utc(datum.timestamp)
    if hasattr(datum, "value"):
        return [Sample(timestamp, float(datum.value))]
    count = float(datum.sample_count)
    if count <= 0 or statistic not in _STATISTIC_NAMES:
        return []
    if statistic == "Minimum":
        value = float(datum.min)
    elif statistic == "Maximum":
        value = float(datum.max)
    else:
        value = float(datum.sum) / count
    return [Sample(timestamp, value, count)]


def _dimension_key(dimensions: Iterable[Any]) -> frozenset[tuple[str, str]]:
    return frozenset((str(d.name), str(d.value)) for d in dimensions)


def _publish(topic_arn: str, subject: str, body: str) -> None:
    """Publish as CloudWatch does: a service delivering to the topic, straight into moto's SNS
    backend (its subscriptions deliver as on a Publish call), not an API caller's round trip."""
    from moto.sns.models import sns_backends

    _arn, _partition, _service, region, account_id, _name = topic_arn.split(":", 5)
    sns_backends[account_id][region].publish(body, arn=topic_arn, subject=subject)


def _backend(account_id: str, region: str) -> Any:
    from moto.cloudwatch.models import cloudwatch_backends

    return cloudwatch_backends[account_id][region]


MetricKey = tuple[str, str, str, frozenset[tuple[str, str]]]  # (account, namespace, name, dimensions)


def _metric_key(alarm: Mapping[str, Any]) -> MetricKey:
    """The metric an (evaluable) alarm watches, itself or through FILL metric math."""
    metric = watched_metric(alarm)
    dimensions = frozenset((d["Name"], d["Value"]) for d in metric["Dimensions"])
    return (alarm["AlarmArn"].split(":")[4], metric["Namespace"] or "", metric["MetricName"] or "", dimensions)


def _stat_key(alarm: Mapping[str, Any], stat: StatQuery) -> MetricKey:
    """The metric one MetricStat query of a metric-math alarm reads."""
    return (alarm["AlarmArn"].split(":")[4], stat.namespace, stat.metric_name, frozenset(stat.dimensions))


def _metric_keys(alarm: Mapping[str, Any], rule: AlarmRule) -> list[MetricKey]:
    """Every metric an (evaluable) alarm reads: one, or each MetricStat of its metric math."""
    if rule.math is not None:
        return [_stat_key(alarm, stat) for stat in rule.math.stats]
    return [_metric_key(alarm)]


_PREFIX_STATISTICS = frozenset({"Sum", "SampleCount", "Average"})


def _sum_and_count(datum: Any) -> tuple[float, float]:
    """What one stored datapoint adds to a period's Sum and SampleCount."""
    if hasattr(datum, "value"):
        return float(datum.value), 1.0
    count = float(datum.sample_count)
    return (float(datum.sum), count) if count > 0 else (0.0, 0.0)


@dataclass
class _Prefix:
    """Running Sum and SampleCount of one metric's datapoints in time order: a window's totals
    are two bisections, whatever its length (a 1-day window re-read each virtual minute)."""

    times: list[datetime]
    sums: list[float]  # sums[i]: the total of the first i datapoints
    counts: list[float]

    @classmethod
    def of(cls, series: Sequence[Any]) -> _Prefix:
        prefix = cls([], [0.0], [0.0])
        for datum in series:
            prefix.add(datum)
        return prefix

    def add(self, datum: Any) -> None:
        value, count = _sum_and_count(datum)
        self.times.append(_utc(datum.timestamp))
        self.sums.append(self.sums[-1] + value)
        self.counts.append(self.counts[-1] + count)

    def totals(self, start: datetime, end: datetime) -> tuple[float, float]:
        """(Sum, SampleCount) of the datapoints in [start, end)."""
        i, j = bisect.bisect_left(self.times, _utc(start)), bisect.bisect_left(self.times, _utc(end))
        return self.sums[j] - self.sums[i], self.counts[j] - self.counts[i]


def _datum_time(datum: Any) -> datetime:
    return _utc(datum.timestamp)


class _MetricIndex:
    """moto's datapoints of one account and region by metric, indexed as the list grows.

    moto only ever appends to `metric_data`; a new list (a reset backend) or a shorter one is
    indexed again from the start. Each metric's datapoints are kept in time order (a late one is
    bisected into place), so that an evaluation reads only its window's, not the metric's history.
    """

    def __init__(self, account_id: str) -> None:
        self.account_id = account_id
        self._source: Any = None
        self._seen = 0
        self.by_metric: dict[MetricKey, list[Any]] = {}
        self._prefixes: dict[MetricKey, _Prefix] = {}  # built on first use, extended as data arrives

    def update(self, data: list[Any]) -> None:
        if data is not self._source or len(data) < self._seen:
            self._source, self._seen, self.by_metric, self._prefixes = data, 0, {}, {}
        fresh = data[self._seen :]
        self._seen += len(fresh)
        for datum in fresh:
            key = (self.account_id, datum.namespace, datum.name, _dimension_key(datum.dimensions))
            series = self.by_metric.setdefault(key, [])
            prefix = self._prefixes.get(key)
            if series and _utc(datum.timestamp) < _utc(series[-1].timestamp):
                series.insert(bisect.bisect_right(series, _utc(datum.timestamp), key=_datum_time), datum)
                self._prefixes.pop(key, None)  # a late datapoint: rebuilt when next needed
            else:
                series.append(datum)
                if prefix is not None:
                    prefix.add(datum)

    def totals(self, key: MetricKey, start: datetime, end: datetime) -> tuple[float, float]:
        """(Sum, SampleCount) of the metric's datapoints in [start, end) (real time)."""
        prefix = self._prefixes.get(key)
        if prefix is None:
            prefix = self._prefixes[key] = _Prefix.of(self.by_metric.get(key, []))
        return prefix.totals(start, end)


def _query_description(query: Any) -> dict[str, Any]:
    """A moto MetricDataQuery as DescribeAlarms lists it under Metrics."""
    view: dict[str, Any] = {"Id": query.id, "ReturnData": str(query.return_data).lower() != "false"}
    if query.expression:
        view["Expression"] = query.expression
    if query.label:
        view["Label"] = query.label
    stat = query.metric_stat
    if stat is not None:
        metric = stat.metric
        view["MetricStat"] = {
            "Metric": {
                "Namespace": metric.namespace,
                "MetricName": metric.metric_name,
                "Dimensions": [{"Name": d.name, "Value": d.value} for d in metric.dimensions],
            },
            "Period": int(stat.period),
            "Stat": stat.stat,
        } | ({"Unit": stat.unit} if stat.unit else {})
    return view


def alarm_description(alarm: Any) -> dict[str, Any]:
    """A moto `Alarm` as DescribeAlarms lists it (the members the engine reads; None left out)."""
    view: dict[str, Any] = {
        "AlarmName": alarm.name,
        "AlarmArn": alarm.alarm_arn,
        "AlarmDescription": alarm.description,
        "AlarmConfigurationUpdatedTimestamp": alarm.configuration_updated_timestamp,
        "ActionsEnabled": alarm.actions_enabled,
        "OKActions": list(alarm.ok_actions or []),
        "AlarmActions": list(alarm.alarm_actions or []),
        "InsufficientDataActions": list(alarm.insufficient_data_actions or []),
        "StateValue": alarm.state_value,
        "StateReason": alarm.state_reason,
        "StateReasonData": alarm.state_reason_data,
        "StateUpdatedTimestamp": alarm.state_updated_timestamp,
    }
    if alarm.rule is not None:
        view["AlarmRule"] = alarm.rule
    else:
        view |= {
            "MetricName": alarm.metric_name,
            "Namespace": alarm.namespace,
            "Statistic": alarm.statistic,
            "ExtendedStatistic": alarm.extended_statistic,
            "Dimensions": [{"Name": d.name, "Value": d.value} for d in alarm.dimensions],
            "Period": alarm.period,
            "Unit": alarm.unit,
            "EvaluationPeriods": alarm.evaluation_periods,
            "DatapointsToAlarm": alarm.datapoints_to_alarm,
            "Threshold": alarm.threshold,
            "ComparisonOperator": alarm.comparison_operator,
            "TreatMissingData": alarm.treat_missing_data,
            "EvaluateLowSampleCountPercentile": alarm.evaluate_low_sample_count_percentile,
            "Metrics": [_query_description(query) for query in alarm.metric_data_queries] or None,
        }
    return {key: value for key, value in view.items() if value is not None}


# --------------------------------------------------------------------------- notifications


def _cw_time(moment: datetime) -> str:
    """CloudWatch's notation: 2024-01-15T10:30:00.123+0000."""
    moment = _utc(moment)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}+0000"


@cache
def region_description(region: str) -> str:
    """'us-east-1' -> 'US East (N. Virginia)', as alarm notifications name regions."""
    try:
        import botocore.session

        for partition in botocore.session.get_session().get_data("endpoints")["partitions"]:
            described = partition.get("regions", {}).get(region, {}).get("description")
            if described:
                return str(described)
    except Exception:  # pragma: no cover - the region code is an acceptable fallback
        LOG.debug("no description for region %s", region, exc_info=True)
    return region


def _subject(state: AlarmState, name: str, region: str) -> str:
    return shorten(f'{state.value}: "{name}" in {region_description(region)}', SUBJECT_MAX)


def _actions(alarm: Mapping[str, Any], state: AlarmState) -> list[str]:
    key = {
        AlarmState.ALARM: "AlarmActions",
        AlarmState.OK: "OKActions",
        AlarmState.INSUFFICIENT_DATA: "InsufficientDataActions",
    }[state]
    return list(alarm.get(key) or [])


def _state(value: str | None) -> AlarmState:
    try:
        return AlarmState(value or AlarmState.INSUFFICIENT_DATA)
    except ValueError:
        return AlarmState.INSUFFICIENT_DATA


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


@dataclass(frozen=True)
class Transition:
    """One state change the engine made (a silent first INSUFFICIENT_DATA is not one)."""

    alarm_name: str
    alarm_arn: str
    old_state: AlarmState
    new_state: AlarmState
    reason: str
    reason_data: str
    time: datetime  # real
    notified: tuple[str, ...]  # SNS topic ARNs published to


@dataclass
class _Child:
    arn: str
    state: AlarmState
    timestamp: datetime


# --------------------------------------------------------------------------- the engine


class AlarmEngine(Periodic):
    """Evaluates moto's alarms every `interval` real seconds (default: one virtual minute).

    `clock` returns the real now (tests inject one); `origin` is where virtual and real time
    meet (default: the clock's now at construction). `transitions` keeps the last `history`
    state changes; `evaluate_now()` runs a pass synchronously; `start()`/`stop()` the thread.
    `endpoint_url` is accepted for symmetry with the other sandbox parts and unused: the engine
    reads and writes moto's backends in this process, served on loopback or not.
    """

    def __init__(
        self,
        *,
        region: str = "us-east-1",
        endpoint_url: str | None = None,
        time_scale: TimeScale | None = None,
        interval: float | None = None,
        clock: Callable[[], datetime] | None = None,
        origin: datetime | None = None,
        history: int = 1000,
        account_id: str | None = None,
    ) -> None:
        from moto.core import DEFAULT_ACCOUNT_ID

        composite_alarms.install()  # the engine evaluates composites: let them be created
        self.region = region
        self.account_id = account_id or DEFAULT_ACCOUNT_ID
        self.time_scale = time_scale or TimeScale(1.0)
        super().__init__(
            "sandbox-alarm-engine",
            self.time_scale.scale(VIRTUAL_MINUTE) if interval is None else float(interval),
            LOG,
            "alarm evaluation pass failed",
        )
        self.clock = clock or (lambda: datetime.now(UTC))
        self.origin = _utc(origin or self.clock())
        self.transitions: deque[Transition] = deque(maxlen=history)  # newest last
        self._known: dict[str, AlarmState] = {}  # the state the engine last gave each alarm
        self._told: set[tuple[str, str]] = set()  # (alarm, what) already logged at INFO
        self._indexes: dict[str, _MetricIndex] = {}  # account -> its datapoints by metric
        self._judged: dict[str, tuple[Any, ...]] = {}  # alarm -> what its last verdict depended on
        self._pass_lock = threading.Lock()

    # -- lifecycle ----------------------------------------------------------------------------

    def tick(self) -> object:
        return self.evaluate_now()

    # -- one pass -----------------------------------------------------------------------------

    def virtual_now(self) -> datetime:
        return to_virtual(self.clock(), self.origin, self.time_scale)

    def stamp(self, virtual: datetime) -> str:
        """A period's start as a reason shows it: wall-clock time, and the virtual one if it differs."""
        return wall_clock_stamp(virtual, self.origin, self.time_scale)

    def clock_info(self) -> dict[str, Any]:
        """Where virtual and real time meet, and the factor: what `pipeops alarms check` needs."""
        return {"origin": self.origin.isoformat(), "time_scale": self.time_scale.factor}

    def evaluate_now(self) -> list[Transition]:
        """One evaluation pass over every alarm, synchronously; the transitions it made."""
        with self._pass_lock:
            now_real = _utc(self.clock())
            now = to_virtual(now_real, self.origin, self.time_scale)
            metric_alarms, composite_alarms = self._describe_alarms()
            present = {a["AlarmName"] for a in metric_alarms + composite_alarms}
            self._known = {name: state for name, state in self._known.items() if name in present}
            self._judged = {name: basis for name, basis in self._judged.items() if name in present}
            children: dict[str, _Child] = {
                a["AlarmName"]: _Child(a["AlarmArn"], self._current(a)[0], _utc(a["StateUpdatedTimestamp"]))
                for a in metric_alarms + composite_alarms
            }
            made: list[Transition] = []
            rules = {a["AlarmName"]: self._metric_rule(a) for a in metric_alarms}
            data = self._read_metrics(metric_alarms, rules)
            for alarm in metric_alarms:
                rule = rules[alarm["AlarmName"]]
                if rule is None:
                    continue
                basis = self._basis(alarm, rule, data, now)
                if self._judged.get(alarm["AlarmName"]) == basis:
                    continue  # nothing its verdict depends on changed: the same verdict, no effect
                try:
                    transition = self._evaluate_metric_alarm(alarm, rule, data, now, now_real)
                except Exception:
                    LOG.warning("alarm %s: evaluation failed", alarm["AlarmName"], exc_info=True)
                    continue
                self._judged[alarm["AlarmName"]] = self._basis(self._reread(alarm), rule, data, now)
                child = children[alarm["AlarmName"]]
                child.state = self._known.get(alarm["AlarmName"], child.state)
                if transition is not None:
                    child.timestamp = now_real
                    made.append(transition)
            for alarm in self._composites_in_order(composite_alarms):
                try:
                    transition = self._evaluate_composite(alarm, children, now_real)
                except Exception:
                    LOG.warning("composite alarm %s: evaluation failed", alarm["AlarmName"], exc_info=True)
                    continue
                child = children[alarm["AlarmName"]]
                child.state = self._known.get(alarm["AlarmName"], child.state)
                if transition is not None:
                    child.timestamp = now_real
                    made.append(transition)
            self.transitions.extend(made)
            return made

    def _describe_alarms(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(metric alarms, composite alarms) of the engine's account and region, from the backend."""
        metric: list[dict[str, Any]] = []
        composite: list[dict[str, Any]] = []
        for alarm in list(_backend(self.account_id, self.region).alarms.values()):
            (metric if alarm.rule is None else composite).append(alarm_description(alarm))
        return metric, composite

    def _reread(self, alarm: Mapping[str, Any]) -> Mapping[str, Any]:
        """The alarm as it is now (after the pass set its state), or as it was if it is gone."""
        found = _backend(self.account_id, self.region).alarms.get(alarm["AlarmName"])
        return alarm_description(found) if found is not None else alarm

    def _basis(
        self,
        alarm: Mapping[str, Any],
        rule: AlarmRule,
        data: Mapping[MetricKey, list[Any]],
        now: datetime,
    ) -> tuple[Any, ...]:
        """Everything an alarm's verdict depends on: its definition and state (every member), its
        metric's datapoints (moto only appends them: their count tells a change) and, when it has
        any, the evaluation window (whole periods, so it moves once a period; with no datapoint at
        all every window holds none)."""
        count = sum(len(data.get(key, ())) for key in _metric_keys(alarm, rule))
        return (
            repr(sorted(alarm.items())),
            self._known.get(alarm["AlarmName"]),
            evaluation_window(rule, now) if count else None,
            count,
        )

    def _tell_once(self, alarm: str, what: str, message: str, *args: Any) -> None:
        if (alarm, what) not in self._told:
            self._told.add((alarm, what))
            LOG.info(message, *args)

    def _current(self, alarm: Mapping[str, Any]) -> tuple[AlarmState, bool]:
        """(the alarm's state as AWS would have it, whether moto shows its initial Unchecked OK)."""
        unchecked = alarm.get("StateReason") == UNCHECKED_REASON
        if unchecked:
            return self._known.get(alarm["AlarmName"], AlarmState.INSUFFICIENT_DATA), True
        return _state(alarm.get("StateValue")), False

    # -- metric alarms --------------------------------------------------------------------------

    def _metric_rule(self, alarm: Mapping[str, Any]) -> AlarmRule | None:
        name = alarm["AlarmName"]
        try:
            rule = AlarmRule.from_put_metric_alarm(alarm)
        except ValueError as exc:
            self._tell_once(name, "rule", "alarm %s: not evaluated in the sandbox: %s", name, exc)
            return None
        if alarm.get("Namespace") in IGNORE_MISSING_NAMESPACES:
            rule = replace(rule, treat_missing_data=TreatMissingData.IGNORE)
        return rule

    def _read_metrics(
        self, alarms: Sequence[Mapping[str, Any]], rules: Mapping[str, AlarmRule | None]
    ) -> dict[MetricKey, list[Any]]:
        """Datums of the metrics the evaluable alarms watch: (account, namespace, name, dims) ->."""
        accounts = {
            alarm["AlarmArn"].split(":")[4] for alarm in alarms if rules.get(alarm["AlarmName"]) is not None
        }
        found: dict[MetricKey, list[Any]] = {}
        for account in accounts:
            index = self._indexes.get(account)
            if index is None:
                index = self._indexes[account] = _MetricIndex(account)
            index.update(_backend(account, self.region).metric_data)
            found.update(index.by_metric)
        return found

    def _samples(
        self, series: Sequence[Any], statistic: str, unit: str | None, since: datetime
    ) -> list[Sample]:
        """One metric's datapoints from virtual ``since`` on, as samples at virtual moments."""
        real_since = to_real(since, self.origin, self.time_scale)
        samples = []
        for datum in series[bisect.bisect_left(series, real_since, key=_datum_time) :]:  # in time order
            if unit and datum.unit != unit:
                continue
            for sample in datum_samples(datum, statistic):
                samples.append(
                    replace(sample, timestamp=to_virtual(sample.timestamp, self.origin, self.time_scale))
                )
        return samples

    def _evaluate_metric_alarm(
        self,
        alarm: Mapping[str, Any],
        rule: AlarmRule,
        data: Mapping[tuple[str, str, str, frozenset[tuple[str, str]]], list[Any]],
        now: datetime,
        now_real: datetime,
    ) -> Transition | None:
        name = alarm["AlarmName"]
        previous, unchecked = self._current(alarm)
        start, end = evaluation_window(rule, now)
        if rule.math is not None:
            verdict = self._evaluate_math(alarm, rule, data, now, previous)
            counts: Mapping[datetime, float] | None = None
        else:
            series = data.get(_metric_key(alarm), [])
            samples = self._samples(series, rule.statistic, watched_metric(alarm).get("Unit"), start)
            verdict = evaluate_samples(rule, samples, now, previous, stamp=self.stamp)
            counts = aggregate_window(samples, "SampleCount", rule.period_seconds, start, end)
        new = verdict.state
        if new is previous and not unchecked:
            self._known[name] = new
            return None
        reason = _metric_reason(verdict, rule, previous, new)
        reason_data = _metric_reason_data(verdict, rule, counts, now, end)
        self._set_state(name, new, reason, reason_data)
        self._known[name] = new
        if new is previous:  # the first evaluation confirmed AWS's initial state: no transition
            return None
        message = _metric_message(alarm, rule, previous, new, reason, now_real, self.region)
        notified = self._notify(alarm, new, message)
        LOG.info("alarm %s: %s -> %s: %s", name, previous.value, new.value, reason)
        return Transition(name, alarm["AlarmArn"], previous, new, reason, reason_data, now_real, notified)

    def _evaluate_math(
        self,
        alarm: Mapping[str, Any],
        rule: AlarmRule,
        data: Mapping[MetricKey, list[Any]],
        now: datetime,
        previous: AlarmState,
    ) -> Verdict:
        """A metric-math alarm's verdict: each MetricStat aggregated over the evaluation range's
        periods with its own Stat (Sum, SampleCount, Average from the index's running totals),
        then the expressions (alarms.evaluate, 10.)."""
        assert rule.math is not None
        start, end = evaluation_window(rule, now)
        period = timedelta(seconds=rule.period_seconds)
        slots = [start + period * i for i in range((end - start) // period)]
        index = self._indexes[alarm["AlarmArn"].split(":")[4]]
        datapoints: dict[str, dict[datetime, float]] = {}
        for stat in rule.math.stats:
            key = _stat_key(alarm, stat)
            if stat.statistic in _PREFIX_STATISTICS and not stat.unit:
                datapoints[stat.id] = self._period_totals(index, key, stat.statistic, slots, period)
            else:
                samples = self._samples(data.get(key, []), stat.statistic, stat.unit, start)
                datapoints[stat.id] = aggregate_window(samples, stat.statistic, rule.period_seconds, start, end)
        return evaluate_math(rule, datapoints, now, previous, stamp=self.stamp)

    def _period_totals(
        self, index: _MetricIndex, key: MetricKey, statistic: str, slots: Sequence[datetime], period: timedelta
    ) -> dict[datetime, float]:
        """Sum, SampleCount or Average of each virtual period that holds a datapoint."""
        found: dict[datetime, float] = {}
        for slot in slots:
            total, count = index.totals(
                key, to_real(slot, self.origin, self.time_scale), to_real(slot + period, self.origin, self.time_scale)
            )
            if count > 0:
                found[slot] = {"Sum": total, "SampleCount": count}.get(statistic, total / count)
        return found

    # -- composite alarms -----------------------------------------------------------------------

    def _composite_rule(self, alarm: Mapping[str, Any]) -> RuleNode | None:
        name = alarm["AlarmName"]
        try:
            return parse_alarm_rule(alarm.get("AlarmRule", ""))
        except AlarmRuleSyntaxError as exc:
            self._tell_once(name, "rule", "composite alarm %s: not evaluated in the sandbox: %s", name, exc)
            return None

    def _composites_in_order(self, composites: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Evaluable composites, each after the composites its rule refers to; cycles left out."""
        by_name = {a["AlarmName"]: a for a in composites}
        depends: dict[str, list[str]] = {}
        for name, alarm in by_name.items():
            rule = self._composite_rule(alarm)
            if rule is not None:
                depends[name] = [child for child in rule_alarm_names(rule) if child in by_name]
        ordered: list[dict[str, Any]] = []
        done: set[str] = set()
        visiting: set[str] = set()

        def visit(name: str) -> bool:
            if name in done:
                return True
            if name in visiting or name not in depends:
                return False
            visiting.add(name)
            ok = all(visit(child) for child in depends[name])
            visiting.discard(name)
            if ok:
                done.add(name)
                ordered.append(by_name[name])
            return ok

        for name in depends:
            if not visit(name):
                self._tell_once(
                    name,
                    "cycle",
                    "composite alarm %s: its rule depends on a cycle or an unevaluable composite; left alone",
                    name,
                )
        return ordered

    def _evaluate_composite(
        self, alarm: Mapping[str, Any], children: Mapping[str, _Child], now_real: datetime
    ) -> Transition | None:
        name = alarm["AlarmName"]
        rule = parse_alarm_rule(alarm["AlarmRule"])
        for child in rule_alarm_names(rule):
            if child not in children:
                self._tell_once(
                    name,
                    f"missing:{child}",
                    "composite alarm %s: its rule names %s, which does not exist",
                    name,
                    child,
                )
        states = {child_name: child.state for child_name, child in children.items()}
        outcome = evaluate_alarm_rule(rule, states)
        new = AlarmState.ALARM if outcome else AlarmState.OK
        previous, unchecked = self._current(alarm)
        if new is previous and not unchecked:
            self._known[name] = new
            return None
        triggering = [
            atom.alarm
            for atom in _atoms(rule)
            if atom.alarm in children and evaluate_alarm_rule(atom, states) is outcome
        ]
        triggering = list(dict.fromkeys(triggering))
        reason, reason_data = _composite_reason(rule, outcome, triggering, children)
        self._set_state(name, new, reason, reason_data)
        self._known[name] = new
        if new is previous:
            return None
        message = {
            "AlarmName": name,
            "AlarmDescription": alarm.get("AlarmDescription"),
            "AWSAccountId": alarm["AlarmArn"].split(":")[4],
            "NewStateValue": new.value,
            "NewStateReason": reason,
            "StateChangeTime": _cw_time(now_real),
            "Region": region_description(self.region),
            "AlarmArn": alarm["AlarmArn"],
            "OKActions": list(alarm.get("OKActions") or []),
            "AlarmActions": list(alarm.get("AlarmActions") or []),
            "InsufficientDataActions": list(alarm.get("InsufficientDataActions") or []),
            "OldStateValue": previous.value,
            "AlarmRule": alarm["AlarmRule"],
            "TriggeringChildren": [
                {
                    "Arn": children[child].arn,
                    "State": {
                        "Value": children[child].state.value,
                        "Timestamp": _cw_time(children[child].timestamp),
                    },
                }
                for child in triggering
            ],
        }
        notified = self._notify(alarm, new, message)
        LOG.info("composite alarm %s: %s -> %s: %s", name, previous.value, new.value, reason)
        return Transition(name, alarm["AlarmArn"], previous, new, reason, reason_data, now_real, notified)

    # -- effects ------------------------------------------------------------------------------

    def _set_state(self, name: str, state: AlarmState, reason: str, reason_data: str) -> None:
        """What SetAlarmState does, in the backend: CloudWatch moves its own alarms internally."""
        _backend(self.account_id, self.region).set_alarm_state(
            name, shorten(reason, STATE_REASON_MAX), reason_data, state.value
        )

    def _notify(
        self, alarm: Mapping[str, Any], state: AlarmState, message: Mapping[str, Any]
    ) -> tuple[str, ...]:
        if not alarm.get("ActionsEnabled", True):
            return ()
        subject = _subject(state, alarm["AlarmName"], self.region)
        body = json.dumps(message, separators=(",", ":"))
        published = []
        for action in _actions(alarm, state):
            if not action.startswith("arn:") or action.split(":")[2] != "sns":
                self._tell_once(
                    alarm["AlarmName"],
                    f"action:{action}",
                    "alarm %s: action %s is not an SNS topic; not performed in the sandbox",
                    alarm["AlarmName"],
                    action,
                )
                continue
            try:
                _publish(action, subject, body)
            except Exception:
                LOG.warning("alarm %s: could not publish to %s", alarm["AlarmName"], action, exc_info=True)
                continue
            published.append(action)
        return tuple(published)


# --------------------------------------------------------------------------- texts


def _metric_reason(verdict: Verdict, rule: AlarmRule, previous: AlarmState, new: AlarmState) -> str:
    """The evaluator's reason, with CloudWatch's '(minimum M datapoints for A -> B transition)'."""
    reason = verdict.reason
    if new is previous or not reason.startswith("Threshold Crossed") or not reason.endswith("."):
        return reason
    if new is AlarmState.ALARM:
        needed = rule.datapoints_to_alarm
    else:
        needed = rule.evaluation_periods - rule.datapoints_to_alarm + 1
    return f"{reason[:-1]} (minimum {_plural(needed, 'datapoint')} for {previous.value} -> {new.value} transition)."


def _metric_reason_data(
    verdict: Verdict,
    rule: AlarmRule,
    counts: Mapping[datetime, float] | None,
    now: datetime,
    end: datetime,
) -> str:
    """CloudWatch's StateReasonData; ``counts`` (samples per period) is None for metric math,
    whose datapoints are an expression's, not a metric's."""
    evaluated = []
    for point in verdict.datapoints:  # newest first, as CloudWatch lists them
        entry: dict[str, Any] = {"timestamp": _cw_time(point.timestamp)}
        if point.value is not None:
            if counts is not None:
                entry["sampleCount"] = counts.get(point.timestamp, 0.0)
            entry["value"] = point.value
        evaluated.append(entry)
    recent = [p.value for p in reversed(verdict.datapoints) if p.value is not None]
    oldest = min((p.timestamp for p in verdict.datapoints), default=end)
    data: dict[str, Any] = {
        "version": "1.0",
        "queryDate": _cw_time(now),
        "startDate": _cw_time(oldest),
        "statistic" if not rule.is_percentile else "extendedStatistic": rule.statistic,
        "period": rule.period_seconds,
        "recentDatapoints": recent,
        "threshold": rule.threshold,
        "evaluatedDatapoints": evaluated,
    }
    text = json.dumps(data, separators=(",", ":"))
    if len(text) > STATE_REASON_DATA_MAX:
        del data["evaluatedDatapoints"]
        text = json.dumps(data, separators=(",", ":"))
    return text


def _metric_message(
    alarm: Mapping[str, Any],
    rule: AlarmRule,
    previous: AlarmState,
    new: AlarmState,
    reason: str,
    now_real: datetime,
    region: str,
) -> dict[str, Any]:
    """CloudWatch's SNS notification for a metric alarm (the documented schema; a metric-math
    alarm's Trigger carries its Metrics instead of the metric and statistic)."""
    trigger: dict[str, Any] = {
        "MetricName": alarm.get("MetricName"),
        "Namespace": alarm.get("Namespace"),
    }
    if alarm.get("Metrics"):
        trigger = {"Metrics": list(alarm["Metrics"])}
    elif rule.is_percentile:
        trigger["StatisticType"] = "ExtendedStatistic"
        trigger["ExtendedStatistic"] = rule.statistic
    else:
        trigger["StatisticType"] = "Statistic"
        trigger["Statistic"] = _STATISTIC_NAMES[rule.statistic]
    trigger.update(
        {
            "Unit": alarm.get("Unit"),
            "Dimensions": [{"value": d["Value"], "name": d["Name"]} for d in alarm.get("Dimensions", [])],
            "Period": rule.period_seconds,
            "EvaluationPeriods": rule.evaluation_periods,
            "DatapointsToAlarm": rule.datapoints_to_alarm,
            "ComparisonOperator": rule.comparison.value,
            "Threshold": rule.threshold,
            "TreatMissingData": alarm.get("TreatMissingData") or TreatMissingData.MISSING.value,
            "EvaluateLowSampleCountPercentile": alarm.get("EvaluateLowSampleCountPercentile") or "",
        }
    )
    updated = alarm.get("AlarmConfigurationUpdatedTimestamp")
    return {
        "AlarmName": alarm["AlarmName"],
        "AlarmDescription": alarm.get("AlarmDescription"),
        "AWSAccountId": alarm["AlarmArn"].split(":")[4],
        "AlarmConfigurationUpdatedTimestamp": _cw_time(updated) if updated else None,
        "NewStateValue": new.value,
        "NewStateReason": reason,
        "StateChangeTime": _cw_time(now_real),
        "Region": region_description(region),
        "AlarmArn": alarm["AlarmArn"],
        "OldStateValue": previous.value,
        "OKActions": list(alarm.get("OKActions") or []),
        "AlarmActions": list(alarm.get("AlarmActions") or []),
        "InsufficientDataActions": list(alarm.get("InsufficientDataActions") or []),
        "Trigger": trigger,
    }


def _composite_reason(
    rule: RuleNode, outcome: bool, triggering: Sequence[str], children: Mapping[str, _Child]
) -> tuple[str, str]:
    """CloudWatch's composite reason: '<child ARN> transitioned to ALARM at Sunday 30 October,
    2022 20:47:35 UTC' (the latest-changed triggering child) and {"triggeringAlarms": [...]}."""
    data = {
        "triggeringAlarms": [
            {
                "arn": children[name].arn,
                "state": {
                    "value": children[name].state.value,
                    "timestamp": _cw_time(children[name].timestamp),
                },
            }
            for name in triggering
        ]
    }
    if triggering:
        latest = max((children[name] for name in triggering), key=lambda child: child.timestamp)
        moment = _utc(latest.timestamp)
        reason = f"{latest.arn} transitioned to {latest.state.value} at {moment:%A %d %B, %Y %H:%M:%S} UTC"
    else:
        reason = f"AlarmRule evaluated to {'TRUE' if outcome else 'FALSE'}"
    return reason, json.dumps(data, separators=(",", ":"))
