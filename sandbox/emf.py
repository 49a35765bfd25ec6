"""CloudWatch Embedded Metric Format (EMF) -> PutMetricData, as Lambda's log ingestion does.

A log line is an EMF document when it is a JSON object whose `_aws.CloudWatchMetrics` is a list of
metric directives::

    {"_aws": {"Timestamp": 1764400000000,
              "CloudWatchMetrics": [{"Namespace": "pipeops",
                                     "Dimensions": [["service", "stage"]],
                                     "Metrics": [{"Name": "FilesProcessed", "Unit": "Count"}]}]},
     "service": "pipeops", "stage": "dev", "FilesProcessed": [1, 2]}

Every directive produces, for each dimension set, one datum per metric: the dimension values and
the metric values (a number or a list of numbers) are read from the document's root members; the
timestamp is `_aws.Timestamp` in epoch milliseconds. Like CloudWatch, invalid pieces are skipped
(a dimension set naming a missing member, a non-numeric value) rather than failing the line.

`put_in_process` stores MetricData straight into the in-process moto's CloudWatch backend, as
AWS's own services publish theirs (Lambda's log ingestion, SQS, Step Functions): not through
the PutMetricData API. The sandbox's publishers use it: a boto3 round trip (serialize, sign,
parse, dispatch) per batch cost more CPU than the handlers' own calls it competed with.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# CloudWatch StandardUnit values; anything else is published as "None", as CloudWatch would reject it.
STANDARD_UNITS = frozenset(
    {
        "Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes", "Gigabytes",
        "Terabytes", "Bits", "Kilobits", "Megabits", "Gigabits", "Terabits", "Percent", "Count",
        "Bytes/Second", "Kilobytes/Second", "Megabytes/Second", "Gigabytes/Second",
        "Terabytes/Second", "Bits/Second", "Kilobits/Second", "Megabits/Second",
        "Gigabits/Second", "Terabits/Second", "Count/Second", "None",
    }
)  # fmt: skip

MAX_DATUMS_PER_CALL = 1000
MAX_VALUES_PER_DATUM = 150


@dataclass(frozen=True)
class EmfDatum:
    """One metric datum extracted from an EMF document."""

    namespace: str
    name: str
    unit: str
    values: tuple[float, ...]
    dimensions: tuple[tuple[str, str], ...]
    timestamp: dt.datetime
    storage_resolution: int = 60

    def to_metric_data(self) -> list[dict[str, Any]]:
        """The boto3 `MetricData` entries for this datum (lists are split in 150-value chunks)."""
        entries = []
        for start in range(0, len(self.values), MAX_VALUES_PER_DATUM):
            chunk = self.values[start : start + MAX_VALUES_PER_DATUM]
            entry: dict[str, Any] = {
                "MetricName": self.name,
                "Dimensions": [{"Name": k, "Value": v} for k, v in self.dimensions],
                "Timestamp": self.timestamp,
                "Unit": self.unit,
            }
            if len(chunk) == 1:
                entry["Value"] = chunk[0]
            else:
                entry["Values"] = list(chunk)
            if self.storage_resolution == 1:
                entry["StorageResolution"] = 1
            entries.append(entry)
        return entries


def parse_emf(line: str) -> dict[str, Any] | None:
    """The EMF document on this log line, or None when the line is not one."""
    text = line.strip()
    if not text.startswith("{") or "CloudWatchMetrics" not in text:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    meta = doc.get("_aws")
    if not isinstance(meta, dict) or not isinstance(meta.get("CloudWatchMetrics"), list):
        return None
    return doc


def _numbers(raw: Any) -> tuple[float, ...]:
    items = raw if isinstance(raw, list) else [raw]
    out = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int | float):
            continue
        value = float(item)
        if math.isfinite(value):
            out.append(value)
    return tuple(out)


def _timestamp(meta: dict[str, Any], default: dt.datetime | None) -> dt.datetime:
    raw = meta.get("Timestamp")
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        return dt.datetime.fromtimestamp(raw / 1000.0, tz=dt.UTC)
    return default or dt.datetime.now(tz=dt.UTC)


def extract_datums(doc: dict[str, Any], default_time: dt.datetime | None = None) -> list[EmfDatum]:
    """Every metric datum an EMF document describes."""
    meta = doc.get("_aws") or {}
    timestamp = _timestamp(meta, default_time)
    datums: list[EmfDatum] = []
    for directive in meta.get("CloudWatchMetrics") or []:
        if not isinstance(directive, dict):
            continue
        namespace = directive.get("Namespace")
        if not isinstance(namespace, str) or not namespace:
            continue
        dimension_sets = directive.get("Dimensions")
        if not isinstance(dimension_sets, list) or not dimension_sets:
            dimension_sets = [[]]
        resolved_sets: list[tuple[tuple[str, str], ...]] = []
        for dim_set in dimension_sets:
            if not isinstance(dim_set, list):
                continue
            keys = [k for k in dim_set if isinstance(k, str)]
            if any(k not in doc or isinstance(doc[k], dict | list) for k in keys):
                continue  # CloudWatch drops a dimension set whose member is missing
            resolved_sets.append(tuple((k, str(doc[k])) for k in keys))
        for metric in directive.get("Metrics") or []:
            if not isinstance(metric, dict) or not isinstance(metric.get("Name"), str):
                continue
            name = metric["Name"]
            values = _numbers(doc.get(name))
            if not values:
                continue
            unit = metric["Unit"] if metric.get("Unit") in STANDARD_UNITS else "None"
            resolution = 1 if metric.get("StorageResolution") == 1 else 60
            for dims in resolved_sets:
                datums.append(
                    EmfDatum(
                        namespace=namespace,
                        name=name,
                        unit=unit,
                        values=values,
                        dimensions=dims,
                        timestamp=timestamp,
                        storage_resolution=resolution,
                    )
                )
    return datums


def datums_from_lines(lines: Iterable[str], default_time: dt.datetime | None = None) -> list[EmfDatum]:
    out: list[EmfDatum] = []
    for line in lines:
        doc = parse_emf(line)
        if doc is not None:
            out.extend(extract_datums(doc, default_time))
    return out


def publish(cloudwatch: Any, datums: Iterable[EmfDatum]) -> int:
    """PutMetricData for every datum (grouped by namespace, 1000 per call); returns entries sent."""
    by_namespace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for datum in datums:
        by_namespace[datum.namespace].extend(datum.to_metric_data())
    sent = 0
    for namespace, entries in by_namespace.items():
        for start in range(0, len(entries), MAX_DATUMS_PER_CALL):
            batch = entries[start : start + MAX_DATUMS_PER_CALL]
            cloudwatch.put_metric_data(Namespace=namespace, MetricData=batch)
            sent += len(batch)
    return sent


def _backend_datum(entry: dict[str, Any]) -> dict[str, Any]:
    """A boto3 MetricData entry as moto's backend holds a parsed one: naive UTC times, floats."""
    out = dict(entry)
    timestamp = entry.get("Timestamp")
    if isinstance(timestamp, dt.datetime) and timestamp.tzinfo is not None:
        out["Timestamp"] = timestamp.astimezone(dt.UTC).replace(tzinfo=None)
    if "Value" in entry:
        out["Value"] = float(entry["Value"])
    if entry.get("Values"):
        out["Values"] = [float(v) for v in entry["Values"]]
    if entry.get("Counts"):
        out["Counts"] = [float(c) for c in entry["Counts"]]
    if entry.get("StatisticValues"):
        out["StatisticValues"] = {k: float(v) for k, v in entry["StatisticValues"].items()}
    return out


def put_in_process(
    namespace: str, metric_data: Iterable[dict[str, Any]], *, account_id: str, region: str
) -> int:
    """Store boto3-shaped MetricData in this process's moto CloudWatch backend; returns entries stored.

    moto's backend validates them as PutMetricData would (NaN, Value with Values, ...) and raises
    its own error for a bad entry. Readers (GetMetricStatistics, the alarm engine) see them at once.
    """
    from moto.cloudwatch.models import cloudwatch_backends

    entries = [_backend_datum(entry) for entry in metric_data]
    if entries:
        cloudwatch_backends[account_id][region].put_metric_data(namespace, entries)
    return len(entries)


def publish_in_process(datums: Iterable[EmfDatum], *, account_id: str, region: str) -> int:
    """`publish`, into the in-process backend (`put_in_process`) instead of through an API client."""
    by_namespace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for datum in datums:
        by_namespace[datum.namespace].extend(datum.to_metric_data())
    return sum(
        put_in_process(namespace, entries, account_id=account_id, region=region)
        for namespace, entries in by_namespace.items()
    )


def publish_lines(cloudwatch: Any, lines: Iterable[str], default_time: dt.datetime | None = None) -> int:
    """Turn the EMF documents among `lines` into CloudWatch metrics; returns entries sent."""
    return publish(cloudwatch, datums_from_lines(lines, default_time))
