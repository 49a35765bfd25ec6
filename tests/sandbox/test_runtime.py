"""The sandbox Lambda runtime: real handlers behind moto's Invoke API and Step Functions tasks."""

from __future__ import annotations

import base64
import json
import os
import re
import sys
import threading
import time

import boto3
import pytest
from moto import mock_aws

from sandbox.clock import TimeScale
from sandbox.runtime import TIMEOUT_ERROR_TYPE, LambdaRuntime
from tests.conftest import TOY_HANDLERS, toy_function, toy_role

REGION = "us-east-1"
SCALE = TimeScale(0.2)  # Timeout 1 s -> cut off after 0.2 s


@pytest.fixture
def aws(executing_aws: None, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("SBX_GREETING", raising=False)
    yield


@pytest.fixture
def runtime(aws):
    with LambdaRuntime(region=REGION, time_scale=SCALE, extra_sys_path=[TOY_HANDLERS]) as rt:
        yield rt


def make_function(name: str, handler: str, timeout: int = 3, env: dict[str, str] | None = None) -> str:
    return toy_function(name, handler, timeout=timeout, MemorySize=256, Environment={"Variables": env or {}})


def invoke(name: str, event: object, log_type: str = "None") -> tuple[dict, object]:
    resp = boto3.client("lambda", region_name=REGION).invoke(
        FunctionName=name, Payload=json.dumps(event).encode(), LogType=log_type
    )
    return resp, json.loads(resp["Payload"].read())


def run_state_machine(definition: dict, event: dict, name: str) -> dict:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    arn = sfn.create_state_machine(name=name, definition=json.dumps(definition), roleArn=toy_role())[
        "stateMachineArn"
    ]
    execution = sfn.start_execution(stateMachineArn=arn, name=f"{name}-run", input=json.dumps(event))
    deadline = time.monotonic() + 15
    while True:  # drain: never leave the mock with an execution running
        desc = sfn.describe_execution(executionArn=execution["executionArn"])
        if desc["status"] != "RUNNING" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert desc["status"] != "RUNNING", "execution did not finish"
    return desc


# --------------------------------------------------------------------------- Invoke API


def test_invoke_api_runs_the_real_handler_with_a_realistic_context(runtime):
    arn = make_function("sbx-echo", "sbx_echo.handler", timeout=3, env={"SBX_GREETING": "hello"})

    resp, body = invoke("sbx-echo", {"tag": "one"}, log_type="Tail")
    _, body2 = invoke("sbx-echo", {"tag": "two"})

    assert resp["StatusCode"] == 200 and "FunctionError" not in resp
    assert body["event"] == {"tag": "one"}
    assert body["function_name"] == "sbx-echo"
    assert body["function_version"] == "$LATEST"
    assert body["invoked_function_arn"].startswith(arn)
    assert body["memory_limit_in_mb"] == 256
    assert re.fullmatch(r"[0-9a-f-]{36}", body["aws_request_id"])
    assert body["log_group_name"] == "/aws/lambda/sbx-echo"
    assert re.fullmatch(r"\d{4}/\d{2}/\d{2}/\[\$LATEST\][0-9a-f]{32}", body["log_stream_name"])
    # environment applied while the module was imported
    assert body["greeting_at_import"] == "hello"
    assert body["function_at_import"] == "sbx-echo"
    assert body["region"] == REGION
    # module state persists like a warm container
    assert (body["calls"], body2["calls"]) == (1, 2)
    # remaining time honours Timeout (virtual ms) and decreases
    first, second = body["remaining"]
    assert 3000 >= first > second > 0
    # the LogResult tail carries the Lambda log lines
    tail = base64.b64decode(resp["LogResult"]).decode()
    assert f"START RequestId: {body['aws_request_id']} Version: $LATEST" in tail
    assert "echo request=" in tail and "END RequestId:" in tail and "REPORT RequestId:" in tail
    assert "Init Duration" in tail  # cold start


def test_environment_is_never_deleted_while_installed_and_restored_on_uninstall(runtime):
    # Deleting a variable while another thread copies os.environ (botocore does) raises KeyError
    # in that thread: function variables stay until the runtime is uninstalled.
    before = os.environ.get("AWS_LAMBDA_FUNCTION_NAME")
    make_function("sbx-echo-env", "sbx_echo.handler", env={"SBX_GREETING": "hi"})
    invoke("sbx-echo-env", {})
    assert os.environ.get("SBX_GREETING") == "hi"
    runtime.uninstall()
    assert os.environ.get("AWS_LAMBDA_FUNCTION_NAME") == before
    assert "SBX_GREETING" not in os.environ
    assert os.environ["AWS_DEFAULT_REGION"] == REGION


def test_raising_handler_returns_function_error_with_the_class_name(runtime):
    make_function("sbx-raise", "sbx_raise.handler")

    resp, body = invoke("sbx-raise", {"key": "in/a.csv"})

    assert resp["FunctionError"] == "Unhandled"
    assert body["errorType"] == "PipelineRetryableError"
    assert body["errorMessage"] == "cannot process in/a.csv"
    assert any("sbx_raise.py" in frame for frame in body["stackTrace"])
    assert not any("sandbox/runtime.py" in frame for frame in body["stackTrace"])
    record = runtime.invocations[-1]
    assert record.errored and record.error_type == "PipelineRetryableError"
    assert "about to fail" in record.log_lines
    assert any(line.startswith("[ERROR] PipelineRetryableError: cannot process") for line in record.log_lines)


def test_init_and_marshal_errors_look_like_the_python_runtime(runtime):
    make_function("sbx-missing", "sbx_no_such_module.handler")
    make_function("sbx-nohandler", "sbx_raise.nope")
    make_function("sbx-marshal", "sbx_raise.not_serialisable")

    assert invoke("sbx-missing", {})[1]["errorType"] == "Runtime.ImportModuleError"
    assert invoke("sbx-nohandler", {})[1]["errorType"] == "Runtime.HandlerNotFound"
    resp, body = invoke("sbx-marshal", {})
    assert resp["FunctionError"] == "Unhandled"
    assert body["errorType"] == "Runtime.MarshalError"


def test_logs_land_in_the_function_log_group(runtime):
    make_function("sbx-echo-logs", "sbx_echo.handler")
    _, body = invoke("sbx-echo-logs", {"tag": "logged"})

    logs = boto3.client("logs", region_name=REGION)
    group = "/aws/lambda/sbx-echo-logs"
    streams = logs.describe_log_streams(logGroupName=group)["logStreams"]
    assert [s["logStreamName"] for s in streams] == [body["log_stream_name"]]
    events = logs.get_log_events(
        logGroupName=group, logStreamName=body["log_stream_name"], startFromHead=True
    )
    messages = [e["message"] for e in events["events"]]
    assert messages[0] == f"START RequestId: {body['aws_request_id']} Version: $LATEST"
    assert f"echo request={body['aws_request_id']} tag=logged" in messages
    assert messages[-2] == f"END RequestId: {body['aws_request_id']}"
    assert messages[-1].startswith(f"REPORT RequestId: {body['aws_request_id']}\tDuration: ")
    assert "Memory Size: 256 MB" in messages[-1]


def test_timeout_is_enforced_and_late_output_never_leaks(runtime):
    make_function("sbx-sleep", "sbx_sleep.handler", timeout=1)
    make_function("sbx-echo-after", "sbx_echo.handler")

    resp, body = invoke("sbx-sleep", {"seconds": 0.6})  # cut off at 1 s x 0.2, before the sleep ends
    assert resp["FunctionError"] == "Unhandled"
    assert body == {"errorType": TIMEOUT_ERROR_TYPE, "errorMessage": "Task timed out after 1.00 seconds"}

    _, echoed = invoke("sbx-echo-after", {"tag": "after"})  # runs while the abandoned worker sleeps
    time.sleep(0.6)  # let the abandoned worker wake up and print
    sleep_record, echo_record = runtime.invocations[-2:]
    assert sleep_record.timed_out and sleep_record.error_type == TIMEOUT_ERROR_TYPE
    assert "going to sleep" in sleep_record.log_lines
    assert sleep_record.log_lines[-1].endswith("Status: timeout")
    assert any(line.endswith("Task timed out after 1.00 seconds") for line in sleep_record.log_lines)
    for record in (sleep_record, echo_record):
        assert not any("woke up LATE" in line for line in record.log_lines)
    assert echoed["event"] == {"tag": "after"}


def test_concurrent_invocations_capture_only_their_own_output(runtime):
    make_function("sbx-echo-a", "sbx_echo.handler")
    make_function("sbx-echo-b", "sbx_echo.handler")
    results: dict[str, dict] = {}

    def call(tag: str) -> None:
        fn = "sbx-echo-a" if tag.endswith(("0", "2", "4")) else "sbx-echo-b"
        results[tag] = runtime.invoke_direct(fn, {"tag": tag}).payload

    threads = [threading.Thread(target=call, args=(f"t{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    by_id = {r.request_id: r for r in runtime.invocations}
    for tag, payload in results.items():
        record = by_id[payload["aws_request_id"]]
        echo_lines = [line for line in record.log_lines if line.startswith("echo ")]
        assert echo_lines == [f"echo request={record.request_id} tag={tag}"]


def test_invoke_direct_uses_the_same_runner(runtime):
    arn = make_function("sbx-direct", "sbx_raise.handler")
    result = runtime.invoke_direct(arn, {"key": "k"})
    assert result.errored and result.error_type == "PipelineRetryableError"
    assert result.payload["errorMessage"] == "cannot process k"
    assert runtime.invocations[-1].request_id == result.request_id


def test_use_docker_false_is_routed_to_the_runner(aws_env: None) -> None:
    with (
        mock_aws(config={"lambda": {"use_docker": False}}),
        LambdaRuntime(region=REGION, extra_sys_path=[TOY_HANDLERS]),
    ):
        make_function("sbx-echo-simple", "sbx_echo.handler")
        _, body = invoke("sbx-echo-simple", {"tag": "simple"})
    assert body["event"] == {"tag": "simple"}


def test_uninstall_restores_moto_and_sys_path(aws):
    from moto.awslambda.models import LambdaFunction

    original = LambdaFunction.__dict__["_invoke_lambda"]
    rt = LambdaRuntime(extra_sys_path=[TOY_HANDLERS])
    with rt:
        assert LambdaFunction.__dict__["_invoke_lambda"] is not original
        assert str(TOY_HANDLERS) in sys.path
        with pytest.raises(RuntimeError):
            LambdaRuntime().install()
    assert LambdaFunction.__dict__["_invoke_lambda"] is original
    assert str(TOY_HANDLERS) not in sys.path


# --------------------------------------------------------------------------- Step Functions


def _task_machine(resource: str, extra: dict | None = None) -> dict:
    task = {
        "Type": "Task",
        "Resource": resource,
        "Retry": [
            {
                "ErrorEquals": ["PipelineRetryableError"],
                "IntervalSeconds": 1,
                "MaxAttempts": 1,
                "BackoffRate": 1.0,
            }
        ],
        "Catch": [
            {"ErrorEquals": ["PipelineRetryableError"], "ResultPath": "$.error", "Next": "Retryable"},
            {"ErrorEquals": [TIMEOUT_ERROR_TYPE], "ResultPath": "$.error", "Next": "TimedOut"},
        ],
        "End": True,
        **(extra or {}),
    }
    return {
        "StartAt": "Work",
        "States": {
            "Work": task,
            "Retryable": {
                "Type": "Pass",
                "Result": "caught-retryable",
                "ResultPath": "$.caught",
                "End": True,
            },
            "TimedOut": {"Type": "Pass", "Result": "caught-timeout", "ResultPath": "$.caught", "End": True},
        },
    }


def test_state_machine_lambda_task_success(runtime):
    arn = make_function("sbx-echo-sfn", "sbx_echo.handler")
    desc = run_state_machine(_task_machine(arn), {"tag": "sfn"}, "sbx-success")
    assert desc["status"] == "SUCCEEDED"
    output = json.loads(desc["output"])
    assert output["event"] == {"tag": "sfn"} and output["function_name"] == "sbx-echo-sfn"


def test_state_machine_retries_then_catches_the_custom_error_name(runtime):
    arn = make_function("sbx-raise-sfn", "sbx_raise.handler")
    machine = _task_machine(
        "arn:aws:states:::lambda:invoke",
        {"Parameters": {"FunctionName": arn, "Payload.$": "$"}},
    )
    desc = run_state_machine(machine, {"key": "in/b.csv"}, "sbx-catch")
    assert desc["status"] == "SUCCEEDED"
    output = json.loads(desc["output"])
    assert output["caught"] == "caught-retryable"
    assert output["error"]["Error"] == "PipelineRetryableError"
    assert json.loads(output["error"]["Cause"])["errorMessage"] == "cannot process in/b.csv"
    raise_records = [r for r in runtime.invocations if r.function_name == "sbx-raise-sfn"]
    assert len(raise_records) == 2  # first attempt + one retry


def test_state_machine_catches_sandbox_timedout(runtime):
    arn = make_function("sbx-sleep-sfn", "sbx_sleep.handler", timeout=1)
    desc = run_state_machine(_task_machine(arn), {"seconds": 0.5}, "sbx-timeout")
    assert desc["status"] == "SUCCEEDED"
    output = json.loads(desc["output"])
    assert output["caught"] == "caught-timeout"
    assert output["error"]["Error"] == TIMEOUT_ERROR_TYPE
    assert "Task timed out after 1.00 seconds" in output["error"]["Cause"]
    time.sleep(0.4)  # let the abandoned worker finish before the mock goes away


def test_map_items_run_concurrently_through_the_runner(runtime):
    # Timeout 10 s -> cut off after 2 s: the quick items have 40x their time even on a loaded
    # machine, and the slow one never finishes within it.
    arn = make_function("sbx-sleep-map", "sbx_sleep.handler", timeout=10)
    machine = {
        "StartAt": "Each",
        "States": {
            "Each": {
                "Type": "Map",
                "ItemsPath": "$.items",
                "MaxConcurrency": 3,
                "ItemProcessor": {
                    "ProcessorConfig": {"Mode": "INLINE"},
                    "StartAt": "Sleep",
                    "States": {
                        "Sleep": {
                            "Type": "Task",
                            "Resource": arn,
                            "Catch": [{"ErrorEquals": [TIMEOUT_ERROR_TYPE], "Next": "Late"}],
                            "End": True,
                        },
                        "Late": {"Type": "Pass", "Result": "timed-out", "End": True},
                    },
                },
                "End": True,
            }
        },
    }
    items = [{"seconds": 0.05}, {"seconds": 3}, {"seconds": 0.01}]
    desc = run_state_machine(machine, {"items": items}, "sbx-map")
    assert json.loads(desc["output"]) == [{"slept": 0.05}, "timed-out", {"slept": 0.01}]
    records = [r for r in runtime.invocations if r.function_name == "sbx-sleep-map"]
    assert sorted(r.error_type or "ok" for r in records) == ["Sandbox.Timedout", "ok", "ok"]
    for record in records:
        assert record.log_lines.count("going to sleep") == 1
    time.sleep(1.2)  # let the abandoned worker finish (3 s from its start) before the mock goes away


def test_the_time_scale_shortens_a_handlers_time_only_down_to_the_minimum() -> None:
    """Waits are scaled; the time a handler may take is not cut below min(Timeout, minimum)."""
    runtime = LambdaRuntime(region=REGION, time_scale=TimeScale(0.05), min_real_timeout=30.0)
    assert runtime.real_timeout(30) == 30.0  # not 1.5 s: a busy machine must not time it out
    assert runtime.real_timeout(60) == 30.0
    assert runtime.real_timeout(1) == 1.0  # a test that wants the cut-off sets a small Timeout
    assert runtime.real_timeout(900) == 45.0  # long Timeouts are still shortened by the scale
    assert LambdaRuntime(region=REGION, time_scale=TimeScale(0.05)).real_timeout(30) == 1.5


# --------------------------------------------------------------------------- fresh environments


def test_a_changed_configuration_gets_fresh_environments_and_an_unchanged_one_does_not(runtime) -> None:
    """On AWS, UpdateFunctionConfiguration sends the next invocations to new execution
    environments; the sandbox tells whoever keeps state per function, once per change."""
    fresh: list[str] = []
    runtime.on_fresh_environments(fresh.append)
    make_function("sbx-config", "sbx_echo.handler", env={"SBX_GREETING": "hello"})
    make_function("sbx-other", "sbx_echo.handler", env={"SBX_GREETING": "hello"})
    for name in ("sbx-config", "sbx-config", "sbx-other"):
        invoke(name, {"tag": "warm"})
    assert fresh == []  # first invocations and repeated ones: the same environments

    boto3.client("lambda", region_name=REGION).update_function_configuration(
        FunctionName="sbx-config", Environment={"Variables": {"SBX_GREETING": "bonjour"}}
    )
    invoke("sbx-config", {"tag": "after"})
    invoke("sbx-config", {"tag": "again"})
    invoke("sbx-other", {"tag": "untouched"})
    assert fresh == ["sbx-config"]

    boto3.client("lambda", region_name=REGION).update_function_configuration(FunctionName="sbx-config", Timeout=5)
    invoke("sbx-config", {"tag": "timeout changed"})
    assert fresh == ["sbx-config", "sbx-config"]
