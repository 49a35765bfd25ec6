"""The sandbox publishes the AWS/Lambda and AWS/States metrics moto lacks, as AWS names them."""

from __future__ import annotations

import io
import json
import logging
import sys
import threading
import time
import types
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from sandbox import aws_metrics
from sandbox.aws_metrics import AwsMetricsPublisher, execution_metrics, invocation_metrics
from sandbox.clock import TimeScale
from sandbox.runtime import InvocationRecord, LambdaRuntime

REGION = "us-east-1"
SM_ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:pipeline"
EXEC_ARN = "arn:aws:states:us-east-1:123456789012:execution:pipeline:run-1"


def by_name(data: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["MetricName"]: d for d in data}


def record(**changes: Any) -> InvocationRecord:
    fields: dict[str, Any] = {
        "function_name": "pipeops-Detect",
        "request_id": "r-1",
        "duration_ms": 12.5,
        "errored": False,
        "error_type": None,
        "log_lines": (),
        "started_at": 1_700_000_000.0,
        "ended_at": 1_700_000_000.5,
    }
    return InvocationRecord(**(fields | changes))


def status_event(status: str, start_ms: int | None = 1_000, stop_ms: int | None = 4_500) -> dict[str, Any]:
    return {
        "detail-type": "Step Functions Execution Status Change",
        "detail": {
            "executionArn": EXEC_ARN,
            "stateMachineArn": SM_ARN,
            "status": status,
            "startDate": start_ms,
            "stopDate": None if status == "RUNNING" else stop_ms,
        },
    }


# --------------------------------------------------------------------------- datum shapes


def test_an_invocation_gives_invocations_errors_and_duration_at_its_end() -> None:
    data = by_name(invocation_metrics(record()))
    assert set(data) == {"Invocations", "Errors", "Duration"}  # no Throttles: nothing is throttled
    for datum in data.values():
        assert datum["Dimensions"] == [{"Name": "FunctionName", "Value": "pipeops-Detect"}]
        assert datum["Timestamp"] == datetime.fromtimestamp(1_700_000_000.5, tz=UTC)
    assert (data["Invocations"]["Value"], data["Invocations"]["Unit"]) == (1, "Count")
    assert (data["Errors"]["Value"], data["Errors"]["Unit"]) == (0, "Count")
    assert (data["Duration"]["Value"], data["Duration"]["Unit"]) == (12.5, "Milliseconds")


@pytest.mark.parametrize(
    "changes",
    [
        {"errored": True, "error_type": "ValueError"},
        {"errored": True, "error_type": "Sandbox.Timedout", "timed_out": True},
    ],
    ids=["raised", "timed-out"],
)
def test_an_exception_or_a_timeout_is_an_error(changes: dict[str, Any]) -> None:
    assert by_name(invocation_metrics(record(**changes)))["Errors"]["Value"] == 1


def test_a_returned_batch_item_failure_is_not_an_error() -> None:
    payload = json.dumps({"batchItemFailures": [{"itemIdentifier": "m-1"}]})
    assert by_name(invocation_metrics(record(payload=payload)))["Errors"]["Value"] == 0


def test_execution_status_changes_give_the_states_metrics() -> None:
    seen = datetime(2024, 1, 1, tzinfo=UTC)
    [started] = execution_metrics(status_event("RUNNING"), seen)
    assert started["MetricName"] == "ExecutionsStarted" and started["Value"] == 1
    assert started["Dimensions"] == [{"Name": "StateMachineArn", "Value": SM_ARN}]
    assert started["Unit"] == "Count" and started["Timestamp"] == seen
    for status, name in [
        ("SUCCEEDED", "ExecutionsSucceeded"),
        ("FAILED", "ExecutionsFailed"),
        ("TIMED_OUT", "ExecutionsTimedOut"),
        ("ABORTED", "ExecutionsAborted"),
    ]:
        data = by_name(execution_metrics(status_event(status), seen))
        assert set(data) == {name, "ExecutionTime"}
        assert (data[name]["Value"], data[name]["Unit"]) == (1, "Count")
        assert (data["ExecutionTime"]["Value"], data["ExecutionTime"]["Unit"]) == (3_500, "Milliseconds")


def test_a_time_out_without_a_stop_date_ends_when_it_was_seen() -> None:
    seen = datetime.fromtimestamp(10.0, tz=UTC)
    data = by_name(execution_metrics(status_event("TIMED_OUT", start_ms=4_000, stop_ms=None), seen))
    assert data["ExecutionTime"]["Value"] == 6_000


# --------------------------------------------------------------------------- publishing


class RecordingCloudWatch:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls: list[tuple[str, int]] = []

    def put_metric_data(self, Namespace: str, MetricData: list[dict[str, Any]]) -> None:
        if self.fail:
            raise RuntimeError("CloudWatch is down (test)")
        self.calls.append((Namespace, len(MetricData)))


def test_datums_are_sent_off_thread_in_batches_of_at_most_1000() -> None:
    cloudwatch = RecordingCloudWatch()
    with AwsMetricsPublisher(cloudwatch=cloudwatch, watch_executions=False) as publisher:
        for _ in range(1250):
            publisher.invocation_finished("fn", "r", record(function_name="fn"))  # 4 datums each
        publisher.execution_status_changed(status_event("SUCCEEDED"))
        assert publisher.flush(10)
    lambda_sizes = [n for ns, n in cloudwatch.calls if ns == "AWS/Lambda"]
    assert sum(lambda_sizes) == 5000 and max(lambda_sizes) <= aws_metrics.MAX_DATUMS_PER_CALL
    assert [(ns, n) for ns, n in cloudwatch.calls if ns == "AWS/States"] == [("AWS/States", 2)]


def test_datums_that_arrive_while_a_batch_gathers_share_one_call_and_flush_sends_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(aws_metrics, "COALESCE_SECONDS", 3600.0)  # only flush() ends the gathering
    cloudwatch = RecordingCloudWatch()
    with AwsMetricsPublisher(cloudwatch=cloudwatch, watch_executions=False) as publisher:
        publisher.invocation_finished("fn", "r1", record(function_name="fn"))
        deadline = time.monotonic() + 10
        while not publisher._queue.empty() and time.monotonic() < deadline:  # the sender holds it
            time.sleep(0.01)
        publisher.invocation_finished("fn", "r2", record(function_name="fn"))
        publisher.invocation_finished("fn", "r3", record(function_name="fn"))
        assert publisher.flush(10)
    assert cloudwatch.calls == [("AWS/Lambda", 12)]


def test_a_failing_cloudwatch_is_logged_and_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    publisher = AwsMetricsPublisher(cloudwatch=RecordingCloudWatch(fail=True), watch_executions=False).start()
    with caplog.at_level(logging.WARNING, logger="sandbox.aws_metrics"):
        publisher.invocation_started("fn", "r")
        publisher.invocation_finished("fn", "r", record(function_name="fn"))
        assert publisher.flush(10)
        publisher.stop()
    assert publisher.stats()["failed_calls"] >= 1 and publisher.stats()["sent"] == 0
    assert "could not publish" in caplog.text


# --------------------------------------------------------------------------- with the Lambda runtime


@pytest.fixture
def runtime(aws_env: None) -> Iterator[LambdaRuntime]:
    with mock_aws(), LambdaRuntime(region=REGION, time_scale=TimeScale(0.2), publish_logs=False) as rt:
        yield rt


def toy_module(monkeypatch: pytest.MonkeyPatch, **handlers: Any) -> str:
    name = "sbx_aws_metrics_toy"
    module = types.ModuleType(name)
    for attr, func in handlers.items():
        setattr(module, attr, func)
    monkeypatch.setitem(sys.modules, name, module)
    return name


def make_function(name: str, handler: str, timeout: int = 3) -> None:
    iam = boto3.client("iam", region_name=REGION)
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
    try:
        role = iam.get_role(RoleName="metrics-role")["Role"]["Arn"]
    except iam.exceptions.NoSuchEntityException:
        role = iam.create_role(RoleName="metrics-role", AssumeRolePolicyDocument=json.dumps(trust))["Role"][
            "Arn"
        ]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("placeholder.py", "# imported from sys.path\n")
    boto3.client("lambda", region_name=REGION).create_function(
        FunctionName=name,
        Runtime="python3.11",
        Role=role,
        Handler=handler,
        Code={"ZipFile": buf.getvalue()},
        Timeout=timeout,
    )


def statistic(namespace: str, name: str, dimension: tuple[str, str], stat: str = "Sum") -> float | None:
    now = datetime.now(UTC)
    points = boto3.client("cloudwatch", region_name=REGION).get_metric_statistics(
        Namespace=namespace,
        MetricName=name,
        Dimensions=[{"Name": dimension[0], "Value": dimension[1]}],
        StartTime=now - timedelta(minutes=10),
        EndTime=now + timedelta(minutes=1),
        Period=60,
        Statistics=[stat],
    )["Datapoints"]
    if not points:
        return None
    values = [p[stat] for p in points]
    return max(values) if stat == "Maximum" else sum(values)


def lambda_stat(function: str, name: str, stat: str = "Sum") -> float | None:
    return statistic("AWS/Lambda", name, ("FunctionName", function), stat)


def test_the_runtime_reports_errors_timeouts_and_peak_concurrency(
    runtime: LambdaRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    both_in = threading.Barrier(2, timeout=30)
    release = threading.Event()

    def overlapping(event: Any, context: Any) -> dict[str, Any]:
        both_in.wait()  # two invocations of the function run at once, whatever the machine's load
        return {"batchItemFailures": [{"itemIdentifier": "m-1"}]}  # reported, not an error

    def raising(event: Any, context: Any) -> None:
        raise ValueError("bad input (test)")

    def overrunning(event: Any, context: Any) -> None:
        release.wait(30)

    module = toy_module(monkeypatch, overlapping=overlapping, raising=raising, overrunning=overrunning)
    make_function("m-overlap", f"{module}.overlapping")
    make_function("m-raise", f"{module}.raising")
    make_function("m-slow", f"{module}.overrunning", timeout=1)  # cut off after 0.2 s
    publisher = AwsMetricsPublisher(runtime, region=REGION, watch_executions=False).start()
    try:
        threads = [threading.Thread(target=runtime.invoke_direct, args=("m-overlap",)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert runtime.invoke_direct("m-raise").errored
        assert runtime.invoke_direct("m-slow").error_type == "Sandbox.Timedout"
        assert publisher.flush(10)
    finally:
        release.set()
        publisher.stop()
    assert lambda_stat("m-overlap", "Invocations") == 2
    assert lambda_stat("m-overlap", "Errors") == 0
    assert lambda_stat("m-overlap", "ConcurrentExecutions", "Maximum") == 2
    assert lambda_stat("m-raise", "Errors") == 1
    assert lambda_stat("m-slow", "Errors") == 1 and lambda_stat("m-slow", "Invocations") == 1
    assert lambda_stat("m-slow", "Duration", "Maximum") > 0
    assert lambda_stat("m-overlap", "Throttles") is None  # the runtime has no concurrency limit


# --------------------------------------------------------------------------- the whole sandbox


def put_file(sandbox: Any, key: str = "metrics.txt") -> None:
    body = b"mail ann@corp.example\n"
    sandbox.client("s3").put_object(Bucket=sandbox.outputs["InputBucketName"], Key=key, Body=body)


def functions_that_ran(sandbox: Any) -> dict[str, list[InvocationRecord]]:
    ran: dict[str, list[InvocationRecord]] = {}
    for rec in sandbox.runtime.invocations:
        ran.setdefault(rec.function_name, []).append(rec)
    return ran


def sandbox_stat(sandbox: Any, namespace: str, name: str, dimension: tuple[str, str]) -> float | None:
    assert sandbox.endpoint_url is None  # in-process: this test's boto3 reaches the same moto
    return statistic(namespace, name, dimension)


@pytest.mark.slow
def test_a_job_that_succeeds_is_counted_for_each_function_and_the_state_machine(make_sandbox: Any) -> None:
    sandbox = make_sandbox()
    put_file(sandbox)
    assert sandbox.wait_until_idle(120)
    ran = functions_that_ran(sandbox)
    assert len(ran) >= 3, sorted(ran)  # ingest, router, detect, finalize, ...
    for function, records in ran.items():
        assert not any(r.errored for r in records), function
        dim = ("FunctionName", function)
        assert sandbox_stat(sandbox, "AWS/Lambda", "Invocations", dim) >= 1, function
        assert sandbox_stat(sandbox, "AWS/Lambda", "Errors", dim) == 0, function
        assert sandbox_stat(sandbox, "AWS/Lambda", "Duration", dim) is not None, function
    machine = ("StateMachineArn", sandbox.outputs["StateMachineArn"])
    assert sandbox_stat(sandbox, "AWS/States", "ExecutionsStarted", machine) == 1
    assert sandbox_stat(sandbox, "AWS/States", "ExecutionsSucceeded", machine) == 1
    assert sandbox_stat(sandbox, "AWS/States", "ExecutionsFailed", machine) is None
    assert sandbox_stat(sandbox, "AWS/States", "ExecutionTime", machine) > 0


@pytest.mark.slow
def test_a_raising_handler_and_a_failed_execution_are_counted(
    make_sandbox: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def tracking_down(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("tracking table unreachable (injected)")

    # The run's verdict (`finalize`, PrepareComplete) and the FAILED status after it (`write_status`,
    # MarkJobFailed) both go to the tracking table: the function raises, the execution fails.
    monkeypatch.setattr("pipeline.handlers.finalize.finalize", tracking_down)
    monkeypatch.setattr("pipeline.handlers.finalize.write_status", tracking_down)
    sandbox = make_sandbox()
    put_file(sandbox, "doomed.txt")
    assert sandbox.wait_until_idle(120)
    finalize = sandbox.outputs["FinalizeFunctionName"]
    assert any(r.errored for r in functions_that_ran(sandbox)[finalize])
    assert sandbox_stat(sandbox, "AWS/Lambda", "Errors", ("FunctionName", finalize)) >= 1
    machine = ("StateMachineArn", sandbox.outputs["StateMachineArn"])
    assert sandbox_stat(sandbox, "AWS/States", "ExecutionsStarted", machine) == 1
    assert sandbox_stat(sandbox, "AWS/States", "ExecutionsFailed", machine) == 1
    assert sandbox_stat(sandbox, "AWS/States", "ExecutionsSucceeded", machine) is None
