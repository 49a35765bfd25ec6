"""EMF documents -> CloudWatch metrics (unit level, and end to end through the runtime)."""

from __future__ import annotations

import datetime as dt
import json

import boto3
import pytest

from sandbox import emf
from sandbox.runtime import LambdaRuntime
from tests.conftest import TOY_HANDLERS, placeholder_zip

REGION = "us-east-1"
TS_MS = 1_764_400_000_000  # 2025-11-29T07:06:40Z


def _doc(**root) -> dict:
    base = {
        "_aws": {
            "Timestamp": TS_MS,
            "CloudWatchMetrics": [
                {
                    "Namespace": "pipeops",
                    "Dimensions": [["service"], ["service", "stage"]],
                    "Metrics": [
                        {"Name": "FilesProcessed", "Unit": "Count"},
                        {"Name": "Latency", "Unit": "Milliseconds", "StorageResolution": 1},
                    ],
                }
            ],
        },
        "service": "ingest",
        "stage": "dev",
        "FilesProcessed": 2,
        "Latency": [10, 20.5],
    }
    base.update(root)
    return base


@pytest.mark.parametrize(
    "line",
    [
        "plain text",
        "{not json",
        '{"level": "INFO", "message": "hi"}',
        '{"_aws": {"CloudWatchMetrics": {}}}',
        "[1]",
    ],
)
def test_non_emf_lines_are_ignored(line):
    assert emf.parse_emf(line) is None


def test_every_dimension_set_gives_one_datum_per_metric():
    doc = emf.parse_emf(json.dumps(_doc()))
    datums = emf.extract_datums(doc)
    assert {(d.name, d.dimensions) for d in datums} == {
        ("FilesProcessed", (("service", "ingest"),)),
        ("FilesProcessed", (("service", "ingest"), ("stage", "dev"))),
        ("Latency", (("service", "ingest"),)),
        ("Latency", (("service", "ingest"), ("stage", "dev"))),
    }
    files = next(d for d in datums if d.name == "FilesProcessed")
    latency = next(d for d in datums if d.name == "Latency")
    assert (files.unit, files.values, files.namespace) == ("Count", (2.0,), "pipeops")
    assert (latency.unit, latency.values, latency.storage_resolution) == ("Milliseconds", (10.0, 20.5), 1)
    assert files.timestamp == dt.datetime.fromtimestamp(TS_MS / 1000, tz=dt.UTC)
    assert files.to_metric_data()[0]["Value"] == 2.0
    entry = latency.to_metric_data()[0]
    assert entry["Values"] == [10.0, 20.5] and entry["StorageResolution"] == 1


def test_invalid_pieces_are_skipped_not_fatal():
    doc = _doc(stage={"nested": 1}, FilesProcessed="two", Latency=[1, "x", True, 3])
    doc["_aws"]["CloudWatchMetrics"][0]["Metrics"][1]["Unit"] = "Furlongs"
    datums = emf.extract_datums(doc)
    # the [service, stage] set is dropped (stage is not a scalar); FilesProcessed has no number
    assert [(d.name, d.dimensions, d.values, d.unit) for d in datums] == [
        ("Latency", (("service", "ingest"),), (1.0, 3.0), "None")
    ]


def test_empty_dimensions_mean_no_dimensions_and_long_lists_are_chunked():
    doc = _doc(Latency=list(range(400)))
    doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"] = []
    del doc["_aws"]["Timestamp"]
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    datums = emf.extract_datums(doc, default_time=now)
    latency = next(d for d in datums if d.name == "Latency")
    assert latency.dimensions == () and latency.timestamp == now
    chunks = latency.to_metric_data()
    assert [len(c["Values"]) for c in chunks] == [150, 150, 100]


def _stats(cw, namespace: str, name: str, dims: dict[str, str], unit: str, start, end) -> dict:
    resp = cw.get_metric_statistics(
        Namespace=namespace,
        MetricName=name,
        Dimensions=[{"Name": k, "Value": v} for k, v in dims.items()],
        StartTime=start,
        EndTime=end,
        Period=60,
        Statistics=["Sum", "SampleCount"],
        Unit=unit,
    )
    points = resp["Datapoints"]
    return {
        "Sum": sum(p["Sum"] for p in points),
        "SampleCount": sum(p["SampleCount"] for p in points),
        "Unit": {p["Unit"] for p in points},
    }


def test_publish_lines_puts_metric_data(aws):
    cw = boto3.client("cloudwatch", region_name=REGION)
    sent = emf.publish_lines(cw, ["not emf", json.dumps(_doc())])
    assert sent == 4
    ts = dt.datetime.fromtimestamp(TS_MS / 1000, tz=dt.UTC)
    window = (ts - dt.timedelta(minutes=1), ts + dt.timedelta(minutes=1))
    files = _stats(cw, "pipeops", "FilesProcessed", {"service": "ingest", "stage": "dev"}, "Count", *window)
    assert files == {"Sum": 2.0, "SampleCount": 1.0, "Unit": {"Count"}}
    latency = _stats(cw, "pipeops", "Latency", {"service": "ingest", "stage": "dev"}, "Milliseconds", *window)
    assert latency == {"Sum": 30.5, "SampleCount": 2.0, "Unit": {"Milliseconds"}}
    assert _dimension_sets(cw, "pipeops", "Latency") == {("service",), ("service", "stage")}


def _dimension_sets(cw, namespace: str, name: str) -> set[tuple[str, ...]]:
    # moto's get_metric_statistics matches a *subset* of the dimensions (AWS: the exact set), so
    # querying [service] alone would also count the [service, stage] data: check the sets here.
    metrics = cw.list_metrics(Namespace=namespace, MetricName=name)["Metrics"]
    return {tuple(sorted(d["Name"] for d in m["Dimensions"])) for m in metrics}


def test_handler_emf_output_becomes_metrics_and_logs(aws):
    iam = boto3.client("iam", region_name=REGION)
    role = iam.create_role(RoleName="sbx-emf-role", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    lam = boto3.client("lambda", region_name=REGION)
    lam.create_function(
        FunctionName="sbx-emf",
        Runtime="python3.11",
        Role=role,
        Handler="sbx_emf.handler",
        Code={"ZipFile": placeholder_zip()},
    )
    start = dt.datetime.now(tz=dt.UTC) - dt.timedelta(minutes=1)
    with LambdaRuntime(region=REGION, extra_sys_path=[TOY_HANDLERS]) as runtime:
        resp = lam.invoke(FunctionName="sbx-emf", Payload=json.dumps({"files": 3}).encode())
        assert json.loads(resp["Payload"].read()) == {"ok": True}
        record = runtime.invocations[-1]
    end = dt.datetime.now(tz=dt.UTC) + dt.timedelta(minutes=1)

    cw = boto3.client("cloudwatch", region_name=REGION)
    files = _stats(
        cw, "SbxToy", "FilesProcessed", {"service": "sbx-emf", "toy_stage": "test"}, "Count", start, end
    )
    assert files == {"Sum": 3.0, "SampleCount": 1.0, "Unit": {"Count"}}
    latency = _stats(
        cw, "SbxToy/Raw", "BatchLatency", {"queue": "ingest", "stage": "test"}, "Milliseconds", start, end
    )
    assert latency == {"Sum": 60.0, "SampleCount": 3.0, "Unit": {"Milliseconds"}}
    assert _dimension_sets(cw, "SbxToy/Raw", "BatchLatency") == {("queue",), ("queue", "stage")}
    # powertools shares default dimensions between all Metrics objects of the interpreter (other
    # modules may have added some), so only require ours to be there
    (files_dims,) = _dimension_sets(cw, "SbxToy", "FilesProcessed")
    assert {"service", "toy_stage"} <= set(files_dims)

    # the powertools Logger (bound to sys.stdout when the module was imported) was captured too
    logs = boto3.client("logs", region_name=REGION)
    messages = [
        e["message"]
        for e in logs.filter_log_events(logGroupName="/aws/lambda/sbx-emf", filterPattern="processing")[
            "events"
        ]
    ]
    assert len(messages) == 1 and json.loads(messages[0])["files"] == 3
    assert any("processing files" in line for line in record.log_lines)
