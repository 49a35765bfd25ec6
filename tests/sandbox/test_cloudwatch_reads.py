"""sandbox.seams.cloudwatch_reads: metric reads answered from an index of the window asked for, as moto
answers them (where moto is right), with percentiles, and looking only at the window's datapoints."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.cloudwatch.models import CloudWatchBackend
from moto.cloudwatch.responses import CloudWatchResponse
from moto.core.common_models import CloudWatchMetricProvider

from sandbox import seams
from sandbox.seams import cloudwatch_reads
from sandbox.seams.cloudwatch_reads import STATS, moto_reads, percentile

REGION = "us-east-1"
NAMESPACE = "Test/Reads"
T0 = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def cw(aws_env: None) -> Iterator[Any]:
    cloudwatch_reads.install()
    STATS.reset()
    try:
        with mock_aws():
            yield boto3.client("cloudwatch", region_name=REGION)
    finally:
        cloudwatch_reads.uninstall()


def put(cw: Any, rng: random.Random, count: int, names: list[str], functions: list[str], unit: str = "Count") -> None:
    """`count` datapoints over 2 hours after T0, in a shuffled order (late ones included)."""
    data = [
        {
            "MetricName": rng.choice(names),
            "Dimensions": [{"Name": "FunctionName", "Value": rng.choice(functions)}],
            "Timestamp": T0 + dt.timedelta(seconds=rng.uniform(0, 7200)),
            "Value": float(rng.randint(0, 50)),
            "Unit": unit,
        }
        for _ in range(count)
    ]
    for start in range(0, len(data), 500):
        cw.put_metric_data(Namespace=NAMESPACE, MetricData=data[start : start + 500])


def metric_data(cw: Any, queries: list[dict[str, Any]], start: dt.datetime, end: dt.datetime, scan: str) -> Any:
    response = cw.get_metric_data(MetricDataQueries=queries, StartTime=start, EndTime=end, ScanBy=scan)
    return [(r["Id"], r["Label"], r["Timestamps"], r["Values"]) for r in response["MetricDataResults"]]


def stat_query(id_: str, name: str, function: str, stat: str, period: int, **extra: Any) -> dict[str, Any]:
    metric = {"Namespace": NAMESPACE, "MetricName": name, "Dimensions": [{"Name": "FunctionName", "Value": function}]}
    return {"Id": id_, "MetricStat": {"Metric": metric, "Period": period, "Stat": stat}, **extra}


@pytest.mark.parametrize("seed", range(6))
def test_reads_answer_as_moto_does(cw: Any, seed: int) -> None:
    """Single-dimension metrics in one namespace, where moto's matching is AWS's: every read the same."""
    rng = random.Random(seed)
    names, functions = ["Invocations", "Errors", "Duration"], ["f1", "f2", "f3"]
    put(cw, rng, 600, names, functions)
    put(cw, rng, 50, names, functions, unit="Milliseconds")
    cw.put_metric_data(Namespace=NAMESPACE, MetricData=[  # StatisticValues among them: moto's own statistics
        {"MetricName": rng.choice(names), "Dimensions": [{"Name": "FunctionName", "Value": rng.choice(functions)}],
         "Timestamp": T0 + dt.timedelta(seconds=rng.uniform(0, 7200)), "Unit": "Count",
         "StatisticValues": {"SampleCount": 3, "Sum": 9, "Minimum": 1, "Maximum": 5}} for _ in range(20)])
    for _ in range(8):
        start = T0 + dt.timedelta(seconds=rng.randint(-600, 5000), microseconds=rng.randint(0, 999_999))
        end = start + dt.timedelta(seconds=rng.randint(60, 9000))
        period = rng.choice([60, 300, 3600])
        queries = [
            stat_query(f"m{i}", rng.choice(names), rng.choice(functions),
                       rng.choice(["Sum", "Maximum", "Minimum", "Average", "SampleCount"]), period,
                       **({"Label": "labelled"} if i == 0 else {}), **({"ReturnData": False} if i == 2 else {}))
            for i in range(4)
        ]
        queries[1]["MetricStat"]["Unit"] = rng.choice(["Count", "Milliseconds"])
        queries.append({"Id": "e1", "Expression": "m0 + m2"})
        scan = rng.choice(["TimestampAscending", "TimestampDescending"])
        seamed = metric_data(cw, queries, start, end, scan)
        statistics = {
            "Namespace": NAMESPACE, "MetricName": rng.choice(names), "StartTime": start, "EndTime": end,
            "Period": period, "Statistics": ["Sum", "Maximum", "SampleCount"],
            "Dimensions": [{"Name": "FunctionName", "Value": rng.choice(functions)}] if rng.random() < 0.7 else [],
            **({"Unit": "Count"} if rng.random() < 0.3 else {}),
        }
        seamed_statistics = cw.get_metric_statistics(**statistics)["Datapoints"]
        listed = cw.list_metrics(Namespace=NAMESPACE, MetricName=statistics["MetricName"])["Metrics"]
        with moto_reads():
            assert seamed == metric_data(cw, queries, start, end, scan)
            assert seamed_statistics == cw.get_metric_statistics(**statistics)["Datapoints"]
            assert listed == cw.list_metrics(Namespace=NAMESPACE, MetricName=statistics["MetricName"])["Metrics"]


def test_a_read_looks_only_at_its_window_of_its_metric(cw: Any) -> None:
    rng = random.Random(1)
    put(cw, rng, 2000, ["Invocations", "Errors"], ["f1", "f2"])
    assert STATS.indexed == 2000  # indexed as they were put: no read pays for them
    STATS.reset()
    start, end = T0 + dt.timedelta(minutes=30), T0 + dt.timedelta(minutes=40)
    result = metric_data(cw, [stat_query("m0", "Invocations", "f1", "SampleCount", 60)], start, end, "TimestampAscending")
    in_window = sum(result[0][3])
    assert in_window > 0 and STATS.looked_at == in_window  # of 2000 datapoints, those of f1's Invocations in 10 minutes


def test_percentiles_are_computed_from_the_raw_values(cw: Any) -> None:
    data = [
        {"MetricName": "Duration", "Dimensions": [{"Name": "FunctionName", "Value": "f"}],
         "Timestamp": T0 + dt.timedelta(seconds=second), "Value": float(value), "Unit": "Milliseconds"}
        for second, value in [(1, 10), (2, 20), (3, 30), (4, 40), (70, 5)]
    ] + [{"MetricName": "Duration", "Dimensions": [{"Name": "FunctionName", "Value": "f"}],
          "Timestamp": T0 + dt.timedelta(seconds=130), "StatisticValues": {"SampleCount": 2, "Sum": 3, "Minimum": 1, "Maximum": 2}}]
    cw.put_metric_data(Namespace=NAMESPACE, MetricData=data)
    end = T0 + dt.timedelta(minutes=5)
    queries = [stat_query("p50", "Duration", "f", "p50", 60), stat_query("p99", "Duration", "f", "p99", 60),
               stat_query("tm", "Duration", "f", "tm90", 60)]
    (_, _, times50, p50), (_, _, times99, p99), (_, _, _, tm) = metric_data(cw, queries, T0, end, "TimestampAscending")
    # the third minute holds only a StatisticValues datum: no raw values, no percentile (as on AWS)
    assert (times50, p50, p99, tm) == ([T0, T0 + dt.timedelta(minutes=1)], [20.0, 5.0], [40.0, 5.0], [])
    assert times99 == times50
    points = cw.get_metric_statistics(
        Namespace=NAMESPACE, MetricName="Duration", StartTime=T0, EndTime=end, Period=60,
        Dimensions=[{"Name": "FunctionName", "Value": "f"}], ExtendedStatistics=["p50", "p90"],
    )["Datapoints"]
    assert [p.get("ExtendedStatistics") for p in sorted(points, key=lambda p: p["Timestamp"])] == [
        {"p50": 20.0, "p90": 40.0}, {"p50": 5.0, "p90": 5.0}, None
    ]


def test_percentile_is_the_nearest_rank() -> None:
    assert [percentile([3, 1, 2, 4], rank) for rank in (0, 25, 50, 75, 99, 100)] == [1, 1, 2, 3, 4, 4]
    assert percentile([], 50) is None


def test_metric_data_matches_namespace_and_the_exact_dimension_set(cw: Any) -> None:
    both = [{"Name": "A", "Value": "a"}, {"Name": "B", "Value": "b"}]
    for namespace, dimensions, value in [(NAMESPACE, both, 1.0), (NAMESPACE, both[::-1], 2.0),
                                         (NAMESPACE, both[:1], 4.0), ("Other", both, 8.0)]:
        cw.put_metric_data(Namespace=namespace, MetricData=[
            {"MetricName": "M", "Dimensions": dimensions, "Timestamp": T0, "Value": value}])
    query = {"Id": "m", "MetricStat": {"Metric": {"Namespace": NAMESPACE, "MetricName": "M", "Dimensions": both[::-1]},
                                       "Period": 60, "Stat": "Sum"}}
    assert metric_data(cw, [query], T0, T0 + dt.timedelta(minutes=1), "TimestampAscending")[0][3] == [3.0]
    listed = cw.list_metrics(Namespace=NAMESPACE, MetricName="M")["Metrics"]
    assert sorted(len(m["Dimensions"]) for m in listed) == [1, 2]  # each metric once


def test_moto_computes_metrics_only_for_the_s3_namespace() -> None:
    # PROVIDER_NAMESPACES lists what moto's providers publish; a new provider must be added there
    assert [cls.__name__ for cls in CloudWatchMetricProvider.__subclasses__()] == ["S3Backend"]
    assert {"AWS/S3"} == cloudwatch_reads.PROVIDER_NAMESPACES


def test_s3_metrics_are_read_too(cw: Any) -> None:
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="reads-bucket")
    s3.put_object(Bucket="reads-bucket", Key="k", Body=b"12345")
    now = dt.datetime.now(dt.UTC)
    query = {"Id": "s", "MetricStat": {"Metric": {"Namespace": "AWS/S3", "MetricName": "BucketSizeBytes", "Dimensions": [
        {"Name": "StorageType", "Value": "StandardStorage"}, {"Name": "BucketName", "Value": "reads-bucket"}]}, "Period": 86400,
        "Stat": "Maximum"}}
    values = metric_data(cw, [query], now - dt.timedelta(days=1), now, "TimestampAscending")[0][3]
    assert len(values) == 1 and values[0] > 0  # moto's size of the bucket


def test_uninstall_restores_moto_and_installs_are_counted(aws_env: None) -> None:
    patched = [(CloudWatchBackend, "get_metric_data"), (CloudWatchBackend, "get_metric_statistics"),
               (CloudWatchBackend, "put_metric_data"),
               (CloudWatchBackend, "get_filtered_metrics"), (CloudWatchResponse, "get_metric_statistics")]
    before = [owner.__dict__[name] for owner, name in patched]
    cloudwatch_reads.install()
    cloudwatch_reads.install()
    assert all(getattr(owner.__dict__[name], "__pipeops_seam__", False) for owner, name in patched)
    cloudwatch_reads.uninstall()
    assert cloudwatch_reads.installed()
    cloudwatch_reads.uninstall()
    assert not cloudwatch_reads.installed()
    assert [owner.__dict__[name] for owner, name in patched] == before


def test_the_seams_install_it(aws_env: None) -> None:
    seams.install()
    try:
        assert cloudwatch_reads.installed()
    finally:
        seams.uninstall()
    assert not cloudwatch_reads.installed()
