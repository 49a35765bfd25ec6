"""BEHAVIOUR and SPEED seam: moto's CloudWatch metric reads answer as AWS does (percentiles,
exact dimension sets, each metric listed once) and cost the window asked for, not every datapoint
kept.

Pinned to moto 5.2 (pyproject allows >=5.2.5,<5.3), like `sandbox.seams`, which installs this
seam with its own. moto keeps every datapoint in one list (`CloudWatchBackend.metric_data`) and
every read walks it: GetMetricData filters the whole list to the window, then, for each query and
each period of the window, walks the window's datapoints again (a 3-hour render of 134 series at
60 s took 34 s on a sandbox 12 minutes old and timed out at 40); GetMetricStatistics walks the
whole list per call; ListMetrics compares every datapoint with every metric found so far. A served
sandbox gathers 20 virtual minutes of metrics per real minute (its publishers run on the virtual
clock), so every read grew with the sandbox's age.

Here the datapoints are indexed as moto's list grows, at each PutMetricData (moto only appends to
the list; a new or shorter one is indexed again from the start): per metric, times sorted (bisected on insertion, so a late
datapoint takes its place). A read bisects its window out of the series it names and groups those
datapoints into periods in one pass: its cost is the datapoints it answers from.

What each read answers, and where it differs from moto's own code:
- GetMetricData (MetricStat): periods from StartTime, as moto; the metric is matched by namespace,
  name and the exact set of dimensions, as AWS does (moto ignores the namespace when dimensions are
  given and compares dimension lists sorted by a `Dimension.__lt__` that is not an order; without
  dimensions it takes every dimension set). Standard statistics are computed by moto's own
  `Statistics`; percentiles (`p99`, `p99.9`) from the period's raw values (nearest rank; datapoints
  sent as StatisticValues carry none, as on AWS), where moto answered None and failed in its
  serializer, printing a traceback in the sandbox's window. Other extended statistics (tm, wm, tc,
  ts, PR, ...) answer no datapoints, without a traceback. Metric math runs on moto's
  `parse_expression`; a Metric Insights query (`SELECT ...`) leaves the whole call to moto.
- GetMetricStatistics: moto's matching (namespace, name, a subset of the dimensions, Unit) and its
  periods (from the first datapoint found), and ExtendedStatistics (percentiles as above), which
  moto's response ignored.
- ListMetrics: each metric once (namespace, name, dimension set), in the order first seen, with
  moto's filter; moto listed a metric once per datapoint when it had more than one dimension.
moto's computed metrics (S3's BucketSizeBytes and NumberOfObjects, `CloudWatchMetricProvider`) are
computed only for a read of their namespace.

Nothing is expired: CloudWatch keeps 1-minute datapoints for 15 days, and the sandbox's datapoints
carry real timestamps, so a sandbox would have to serve for 18 real hours at the default time scale
before the first would go.

Counted installs (`sandbox.seams.patching`); `moto_reads()` makes the current thread's reads moto's own
(the differential test's reference).
"""

from __future__ import annotations

import bisect
import contextlib
import datetime as dt
import functools
import math
import re
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sandbox.seams.patching import CountedPatches, Patch

KIND = "BEHAVIOUR"

# moto 5.2's CloudWatchMetricProvider subclasses publish only these (tests/sandbox/test_cloudwatch_reads.py
# fails when that changes): their metrics are computed at each read, so only for a read of these.
PROVIDER_NAMESPACES = frozenset({"AWS/S3"})
PERCENTILE = re.compile(r"^p(\d{1,2}(?:\.\d+)?|100(?:\.0+)?)$")

_moto = threading.local()

MetricIdentity = tuple[str, str, frozenset[tuple[str, str]]]  # namespace, name, dimension set


@dataclass
class ReadStats:
    """What the seam did, for tests and the benchmark: datapoints indexed, and datapoints the reads
    looked at (those of the windows and series they named)."""

    indexed: int = 0
    looked_at: int = 0

    def reset(self) -> None:
        self.indexed = self.looked_at = 0


STATS = ReadStats()


# --------------------------------------------------------------------------- pure core


def epoch(moment: dt.datetime) -> float:
    """Seconds since the epoch; a naive time is UTC (as moto stores PutMetricData's)."""
    return (moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)).timestamp()


def percentile(values: Sequence[float], rank: float) -> float | None:
    """The `rank`-th percentile of `values` by nearest rank (the smallest value with at least `rank`%
    of the values at or below it); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = max(1, math.ceil(rank / 100 * len(ordered)))
    return ordered[min(position, len(ordered)) - 1]


def percentile_rank(stat: str) -> float | None:
    """99.9 for "p99.9"; None for a statistic that is not a percentile."""
    match = PERCENTILE.match(stat)
    return float(match.group(1)) if match else None


def period_slices(times: Sequence[float], start: float, period: float) -> Iterator[tuple[int, int, int]]:
    """(period number counted from `start`, first index, index past the last) of each period that
    holds any of `times` (sorted, none before `start`): one bisection per such period."""
    low = 0
    while low < len(times):
        number = int((times[low] - start) // period)
        high = bisect.bisect_left(times, start + (number + 1) * period, low)
        yield number, low, high
        low = high


def plain_statistic(stat: str, values: list[float]) -> float | None:
    """`stat` over plain values (no StatisticValues datapoint among them), as moto's `Statistics`
    computes it (the same sums in the same order); None for a statistic it does not know."""
    rank = percentile_rank(stat)
    if rank is not None:
        return percentile(values, rank)
    if stat == "Sum":
        return float(sum(values))
    if stat == "Average":
        return sum(values) / len(values)
    if stat == "Minimum":
        return float(min(values))
    if stat == "Maximum":
        return float(max(values))
    if stat == "SampleCount":
        return float(len(values))
    return None


# --------------------------------------------------------------------------- the index


class _Series:
    """One metric's datapoints, by time."""

    __slots__ = ("data", "times", "values")

    def __init__(self) -> None:
        self.times: list[float] = []
        self.data: list[Any] = []
        self.values: list[float | None] = []  # a plain datapoint's value; None for StatisticValues

    def add(self, moment: float, datum: Any) -> None:
        value = _plain_value(datum)
        if not self.times or moment >= self.times[-1]:
            self.times.append(moment)
            self.data.append(datum)
            self.values.append(value)
        else:  # late: after those of the same time, as a stable sort would put it
            at = bisect.bisect_right(self.times, moment)
            self.times.insert(at, moment)
            self.data.insert(at, datum)
            self.values.insert(at, value)

    def window(self, start: float, end: float) -> tuple[list[float], list[Any], list[float | None]]:
        low, high = bisect.bisect_left(self.times, start), bisect.bisect_left(self.times, end)
        return self.times[low:high], self.data[low:high], self.values[low:high]


def _plain_value(datum: Any) -> float | None:
    """A MetricDatum's value; None for a MetricAggregatedDatum (StatisticValues), which has none."""
    return getattr(datum, "value", None)


class _MetricIndex:
    """One backend's datapoints, indexed as moto's list grows."""

    def __init__(self) -> None:
        self._source: Any = None
        self._seen = 0
        self.by_identity: dict[MetricIdentity, _Series] = {}
        self.by_name: dict[tuple[str, str], _Series] = {}
        self.first_seen: dict[MetricIdentity, Any] = {}  # insertion-ordered: ListMetrics' order
        self.lock = threading.Lock()

    def update(self, data: list[Any]) -> None:
        """Index what was appended since the last call (call with `lock` held)."""
        if data is not self._source or len(data) < self._seen:
            self._source, self._seen = data, 0
            self.by_identity, self.by_name, self.first_seen = {}, {}, {}
        end = len(data)
        for datum in data[self._seen : end]:
            moment = epoch(datum.timestamp)
            identity = identity_of(datum)
            series = self.by_identity.get(identity)
            if series is None:
                series = self.by_identity[identity] = _Series()
                self.first_seen[identity] = datum
            series.add(moment, datum)
            named = self.by_name.get(identity[:2])
            if named is None:
                named = self.by_name[identity[:2]] = _Series()
            named.add(moment, datum)
        STATS.indexed += end - self._seen
        self._seen = end


def identity_of(datum: Any) -> MetricIdentity:
    return datum.namespace, datum.name, frozenset((d.name, d.value) for d in datum.dimensions)


_indexes: dict[int, tuple[weakref.ref[Any], _MetricIndex]] = {}
_INDEXES_LOCK = threading.Lock()


@contextlib.contextmanager
def _index_of(backend: Any) -> Iterator[_MetricIndex]:
    """The backend's index, brought up to date, held locked for the read."""
    with _INDEXES_LOCK:
        entry = _indexes.get(id(backend))
        if entry is None or entry[0]() is not backend:
            key = id(backend)
            entry = _indexes[key] = (
                weakref.ref(backend, lambda _ref: _indexes.pop(key, None)),
                _MetricIndex(),
            )
    index = entry[1]
    with index.lock:
        index.update(backend.metric_data)
        yield index


def _provided(backend: Any, namespace: str | None) -> list[Any]:
    """moto's computed metrics of `namespace` (all of them for None), computed only when asked for."""
    if namespace and namespace not in PROVIDER_NAMESPACES:
        return []
    return [datum for datum in backend.aws_metric_data if not namespace or datum.namespace == namespace]


# --------------------------------------------------------------------------- statistics


class _Statistics:
    """moto's `Statistics` for a period, with ExtendedStatistics (serialized as the Datapoint's)."""

    def __init__(self, stats: list[str], extended: list[str], moment: dt.datetime, data: list[Any]) -> None:
        from moto.cloudwatch.models import Statistics

        self._standard = Statistics(stats, moment)
        self._standard.metric_data = data
        self._standard.unit = data[-1].unit if data else None
        values = _values(data)
        found = {stat: statistic(stat, data, values) for stat in extended}
        self.extended_statistics = {stat: value for stat, value in found.items() if value is not None} or None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._standard, name)


def _values(data: Iterable[Any]) -> list[float]:
    from moto.cloudwatch.models import MetricDatum

    return [datum.value for datum in data if isinstance(datum, MetricDatum)]


def statistic(stat: str, data: list[Any], values: list[float] | None = None) -> float | None:
    """`stat` over one period's datapoints: moto's `Statistics` for a standard one, a percentile
    from the raw values, None for anything else (no datapoint for that period)."""
    from moto.cloudwatch.models import Statistics

    rank = percentile_rank(stat)
    if rank is not None:
        return percentile(_values(data) if values is None else values, rank)
    stats = Statistics([stat], dt.datetime.now(dt.UTC))
    stats.metric_data = data
    value = stats.get_statistics_for_type(stat)
    return None if value is None else float(value)


# --------------------------------------------------------------------------- the reads


def metric_data(
    backend: Any,
    original: Callable[..., Any],
    queries: list[dict[str, Any]],
    start_time: dt.datetime,
    end_time: dt.datetime,
    scan_by: str = "TimestampAscending",
) -> list[dict[str, Any]]:
    """GetMetricData from the index (see the module docstring for what differs from moto)."""
    from moto.cloudwatch.metric_data_expression_parser import parse_expression

    start_time, end_time = start_time.replace(microsecond=0), end_time.replace(microsecond=0)
    insights = any(str(q.get("Expression", "")).startswith("SELECT") for q in queries)
    if start_time >= end_time or insights:  # moto's errors, worded by moto; Metric Insights: moto's
        return original(backend, queries, start_time, end_time, scan_by)
    start, end = epoch(start_time), epoch(end_time)
    results, returned = [], []
    with _index_of(backend) as index:
        for query in queries:
            if "MetricStat" not in query:
                continue
            stat = query["MetricStat"]
            metric = stat["Metric"]
            identity = (
                metric["Namespace"],
                metric["MetricName"],
                frozenset((d["Name"], d["Value"]) for d in metric.get("Dimensions", [])),
            )
            series = index.by_identity.get(identity)
            times, data, values = series.window(start, end) if series is not None else ([], [], [])
            extra = [d for d in _provided(backend, identity[0]) if identity_of(d) == identity]
            result = _periods(times, data, values, extra, stat, start_time, start, end, scan_by)
            result |= {"id": query["Id"], "label": query.get("Label") or f"{metric['MetricName']} {stat['Stat']}"}
            results.append(result)
            if query.get("ReturnData", True):
                returned.append(result)
    for query in queries:  # metric math, on the results of the MetricStat queries (moto's parser)
        if "Expression" in query:
            computed, timestamps = parse_expression(query["Expression"], results)
            returned.append(
                {
                    "id": query["Id"],
                    "label": query.get("Label") or query["Id"],
                    "values": computed,
                    "timestamps": timestamps,
                    "status_code": "Complete",
                }
            )
    return returned


def _periods(
    times: list[float],
    data: list[Any],
    plain: list[float | None],
    extra: list[Any],
    stat: Mapping[str, Any],
    start_time: dt.datetime,
    start: float,
    end: float,
    scan_by: str,
) -> dict[str, Any]:
    unit = stat.get("Unit")
    for datum in extra:
        moment = epoch(datum.timestamp)
        if start <= moment < end:
            at = bisect.bisect_right(times, moment)
            times, data = [*times[:at], moment, *times[at:]], [*data[:at], datum, *data[at:]]
            plain = [*plain[:at], _plain_value(datum), *plain[at:]]
    STATS.looked_at += len(data)
    period = int(stat["Period"])
    values: list[float] = []
    timestamps: list[dt.datetime] = []
    for number, low, high in period_slices(times, start, period):
        found = plain[low:high]
        if not unit and None not in found:  # plain values: summed as moto sums them, without its objects
            value = plain_statistic(stat["Stat"], found)  # type: ignore[arg-type]  # None not in found
        else:
            chosen = [datum for datum in data[low:high] if not unit or datum.unit == unit]
            value = statistic(stat["Stat"], chosen) if chosen else None
        if value is not None:
            values.append(value)
            timestamps.append(start_time + dt.timedelta(seconds=number * period))
    if scan_by == "TimestampDescending":
        values.reverse()
        timestamps.reverse()
    return {"values": values, "timestamps": timestamps, "status_code": "Complete"}


def metric_statistics(
    backend: Any,
    original: Callable[..., Any],
    namespace: str,
    metric_name: str,
    start_time: dt.datetime,
    end_time: dt.datetime,
    period: int,
    stats: list[str],
    dimensions: list[dict[str, str]],
    unit: str | None = None,
    extended_statistics: list[str] | None = None,
) -> list[Any]:
    """GetMetricStatistics from the index: moto's matching and periods, with ExtendedStatistics."""
    start_time, end_time = start_time.replace(microsecond=0), end_time.replace(microsecond=0)
    if start_time >= end_time:  # moto's error, worded by moto
        return original(backend, namespace, metric_name, start_time, end_time, period, stats, dimensions, unit)
    start, end = epoch(start_time), epoch(end_time)
    with _index_of(backend) as index:
        series = index.by_name.get((namespace, metric_name))
        _, data, _ = series.window(start, end) if series is not None else ([], [], [])
    extra = [
        d for d in _provided(backend, namespace) if d.name == metric_name and start <= epoch(d.timestamp) < end
    ]
    found = [
        d for d in [*data, *extra] if (not unit or d.unit == unit) and (not dimensions or d.filter(None, None, dimensions))
    ]
    STATS.looked_at += len(data) + len(extra)
    if not found:
        return []
    found.sort(key=lambda d: epoch(d.timestamp))
    first = found[0].timestamp
    origin = epoch(first)
    groups: dict[int, list[Any]] = {}
    for datum in found:
        groups.setdefault(int((epoch(datum.timestamp) - origin) // period), []).append(datum)
    return [
        _Statistics(stats, list(extended_statistics or []), first + dt.timedelta(seconds=number * period), group)
        for number, group in sorted(groups.items())
    ]


def filtered_metrics(
    backend: Any, metric_name: str | None, namespace: str | None, dimensions: list[dict[str, str]]
) -> list[Any]:
    """ListMetrics: each metric once, in the order first seen, with moto's filter."""
    with _index_of(backend) as index:
        firsts = list(index.first_seen.values())
    listed: dict[MetricIdentity, Any] = {}
    for datum in [*firsts, *_provided(backend, namespace)]:
        identity = identity_of(datum)
        if identity not in listed and datum.filter(namespace, metric_name, dimensions):
            listed[identity] = datum
    return list(listed.values())


# --------------------------------------------------------------------------- the seam


def _moto_reads_on() -> bool:
    return not _PATCHES.count or getattr(_moto, "on", False)


def _get_metric_data(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def get_metric_data(self: Any, queries: list[dict[str, Any]], start_time: Any, end_time: Any,
                        scan_by: str = "TimestampAscending") -> Any:
        if _moto_reads_on():
            return original(self, queries, start_time, end_time, scan_by)
        return metric_data(self, original, queries, start_time, end_time, scan_by)

    return get_metric_data


def _get_metric_statistics(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def get_metric_statistics(self: Any, namespace: str, metric_name: str, start_time: Any, end_time: Any,
                              period: int, stats: list[str], dimensions: list[dict[str, str]],
                              unit: str | None = None, extended_statistics: list[str] | None = None) -> Any:
        if _moto_reads_on():
            return original(self, namespace, metric_name, start_time, end_time, period, stats, dimensions, unit)
        return metric_statistics(self, original, namespace, metric_name, start_time, end_time, period, stats,
                                 dimensions, unit, extended_statistics)

    return get_metric_statistics


def _put_metric_data(original: Callable[..., Any]) -> Callable[..., Any]:
    """moto's PutMetricData, then the new datapoints indexed: the writer (a publisher thread, a
    handler's metrics) pays for its own datapoints, not the first read after hours of them."""

    @functools.wraps(original)
    def put_metric_data(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        if not _moto_reads_on():
            with _index_of(self):
                pass
        return result

    return put_metric_data


def _get_filtered_metrics(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def get_filtered_metrics(self: Any, metric_name: str, namespace: str, dimensions: list[dict[str, str]]) -> Any:
        if _moto_reads_on():
            return original(self, metric_name, namespace, dimensions)
        return filtered_metrics(self, metric_name, namespace, dimensions)

    return get_filtered_metrics


def _statistics_response(original: Callable[..., Any]) -> Callable[..., Any]:
    """moto's GetMetricStatistics response, passing ExtendedStatistics on to the backend."""

    @functools.wraps(original)
    def get_metric_statistics(self: Any) -> Any:
        from moto.core.responses import ActionResult

        extended = self._get_param("ExtendedStatistics")
        if _moto_reads_on() or not extended:
            return original(self)
        datapoints = self.cloudwatch_backend.get_metric_statistics(
            self._get_param("Namespace"),
            self._get_param("MetricName"),
            self._get_param("StartTime"),
            self._get_param("EndTime"),
            self._get_int_param("Period"),
            self._get_param("Statistics", []),
            self._get_param("Dimensions", []),
            unit=self._get_param("Unit"),
            extended_statistics=list(extended),
        )
        return ActionResult({"Label": self._get_param("MetricName"), "Datapoints": datapoints})

    return get_metric_statistics


@contextlib.contextmanager
def moto_reads() -> Iterator[None]:
    """Answer this thread's metric reads with moto's own code (the reference)."""
    previous = getattr(_moto, "on", False)
    _moto.on = True
    try:
        yield
    finally:
        _moto.on = previous


def _patches() -> list[Patch]:
    """Every patch of this seam; the owners are moto's own."""
    from moto.cloudwatch.models import CloudWatchBackend
    from moto.cloudwatch.responses import CloudWatchResponse

    return [
        Patch(CloudWatchBackend, "get_metric_data", _get_metric_data),
        Patch(CloudWatchBackend, "get_metric_statistics", _get_metric_statistics),
        Patch(CloudWatchBackend, "get_filtered_metrics", _get_filtered_metrics),
        Patch(CloudWatchBackend, "put_metric_data", _put_metric_data),
        Patch(CloudWatchResponse, "get_metric_statistics", _statistics_response),
    ]


def _drop_indexes() -> None:
    with _INDEXES_LOCK:
        _indexes.clear()


_PATCHES = CountedPatches(_patches, marker="__pipeops_seam__", after_uninstall=_drop_indexes)


# The module's API: counted, one uninstall per install (`sandbox.seams.patching`).
install, uninstall, installed = _PATCHES.install, _PATCHES.uninstall, _PATCHES.installed
