"""Metrics: one EMF document per invocation, under its own function's name, whatever runs beside it,
split as CloudWatch requires."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from aws_lambda_powertools.metrics.exceptions import MetricValueError

from pipeline.telemetry import metrics
from pipeline.telemetry.catalog import CATALOG, Metric
from pipeline.telemetry.handler import instrumented
from pipeline.telemetry.metrics import emit


class Context:
    def __init__(self, function_name: str) -> None:
        self.function_name = function_name
        self.aws_request_id = f"req-{function_name}"
        self.memory_limit_in_mb = 128


@pytest.fixture(autouse=True)
def fresh_metric_sets(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("STAGE", "test")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "PipeOpsTest")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "pipeops")
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    metrics.reset()
    yield
    metrics.reset()


def documents(text: str) -> list[dict[str, Any]]:
    """The EMF documents among the printed lines."""
    docs = [json.loads(line) for line in text.splitlines() if line.startswith("{") and '"_aws"' in line]
    return [doc for doc in docs if "CloudWatchMetrics" in doc["_aws"]]


def metric_names(doc: dict[str, Any]) -> set[str]:
    return {m["Name"] for directive in doc["_aws"]["CloudWatchMetrics"] for m in directive["Metrics"]}


def test_an_invocation_prints_one_document_with_every_point_and_its_dimensions(capsys) -> None:
    @instrumented("detect")
    def handler(event: Any, context: Any) -> None:
        emit(Metric.FILES_DETECTED)
        emit(Metric.PII_ENTITIES_DETECTED, 3)
        emit(Metric.FILES_DETECTED)

    handler({}, Context("DetectFn"))
    handler({}, Context("DetectFn"))
    first, second = documents(capsys.readouterr().out)
    for doc in (first, second):  # the metric set is reused: the second is not the first's leftovers
        [directive] = doc["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == "PipeOpsTest"
        assert sorted(directive["Dimensions"][0]) == ["function", "service", "stage"]
        assert (doc["function"], doc["stage"], doc["service"]) == ("DetectFn", "test", "pipeops")
        assert doc["FilesDetected"] == [1.0, 1.0] and doc["PiiEntitiesDetected"] == [3.0]
        assert {m["Name"]: m["Unit"] for m in directive["Metrics"]} == {"FilesDetected": "Count", "PiiEntitiesDetected": "Count"}


def test_an_invocation_without_points_prints_nothing_and_a_failing_one_still_flushes(capsys) -> None:
    @instrumented("quiet")
    def quiet(event: Any, context: Any) -> None:
        return None

    @instrumented("failing")
    def failing(event: Any, context: Any) -> None:
        emit(Metric.FILE_FAILURES)
        raise RuntimeError("boom")

    quiet({}, Context("QuietFn"))
    with pytest.raises(RuntimeError):
        failing({}, Context("FailingFn"))
    [doc] = documents(capsys.readouterr().out)
    assert doc["function"] == "FailingFn" and doc["FileFailures"] == [1.0]


def test_concurrent_invocations_never_publish_each_others_points(capsys) -> None:
    """The sandbox runs functions on threads of one interpreter: points stay with their invocation."""
    both_emitted = threading.Barrier(2)

    @instrumented("either")
    def handler(event: Any, context: Any) -> None:
        emit(event["metric"], event["value"])
        both_emitted.wait(timeout=10)  # the other invocation has emitted too, and is still open
        emit(event["metric"], event["value"])

    calls = [
        ({"metric": Metric.JOBS_STARTED, "value": 1}, Context("RouterFn")),
        ({"metric": Metric.FILES_INGESTED, "value": 2}, Context("IngestFn")),
    ]
    threads = [threading.Thread(target=handler, args=call) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    docs = {doc["function"]: doc for doc in documents(capsys.readouterr().out)}
    assert set(docs) == {"RouterFn", "IngestFn"}
    assert metric_names(docs["RouterFn"]) == {"JobsStarted"} and docs["RouterFn"]["JobsStarted"] == [1.0, 1.0]
    assert metric_names(docs["IngestFn"]) == {"FilesIngested"} and docs["IngestFn"]["FilesIngested"] == [2.0, 2.0]


def test_a_point_outside_an_invocation_is_its_own_document(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "ScriptFn")
    emit(Metric.RECONCILE_RUNS)
    [doc] = documents(capsys.readouterr().out)
    assert doc["function"] == "ScriptFn" and doc["ReconcileRuns"] == [1.0]


def test_a_refused_point_raises_and_does_not_ride_along_in_the_next_document(capsys) -> None:
    @instrumented("bad")
    def handler(event: Any, context: Any) -> None:
        emit(Metric.FILES_REDACTED, event["value"])

    with pytest.raises(MetricValueError):
        handler({"value": "many"}, Context("RedactFn"))
    handler({"value": 2}, Context("RedactFn"))
    [doc] = documents(capsys.readouterr().out)
    assert doc["FilesRedacted"] == [2.0]


# ------------------------------------------------------------------------------ limits and switches


def test_every_catalog_metric_is_accepted_and_a_long_invocation_is_split_as_cloudwatch_requires(capsys) -> None:
    @instrumented("busy")
    def handler(event: Any, context: Any) -> None:
        for metric in CATALOG:
            emit(metric)
        for value in range(150):
            emit(Metric.QUEUE_WAIT, value)

    handler({}, Context("BusyFn"))
    docs = documents(capsys.readouterr().out)
    waits = [value for doc in docs for value in doc.get("QueueWait", [])]
    assert waits == [1.0] + [float(v) for v in range(150)]
    assert all(len(doc.get("QueueWait", [])) <= 100 for doc in docs)  # EMF: 100 values at most
    assert {name for doc in docs for name in metric_names(doc)} == {spec.name.value for spec in CATALOG.values()}
    assert all(doc["function"] == "BusyFn" and doc["stage"] == "test" for doc in docs)


def test_disabled_metrics_print_nothing(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    metrics.reset()
    emit(Metric.RECONCILE_RUNS)
    assert documents(capsys.readouterr().out) == []
