"""A Lambda task's function is invoked in-process (sandbox.seams.lambda_tasks), deciding what the client did.

Each scenario runs twice in one moto, through the seam and through moto's own client round trip
(the seam's `__wrapped__`), and both runs must end the same way: output, error and cause, and the
history's event types. IAM decides both.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.client import BaseClient
from moto import mock_aws
from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils

from sandbox import seams
from sandbox.clock import TimeScale
from sandbox.iam_enforcement import IamEnforcement
from sandbox.runtime import LambdaRuntime
from sandbox.seams import iam_calls, lambda_tasks
from tests.conftest import LAMBDA_TRUST, TOY_HANDLERS, placeholder_zip

REGION = "us-east-1"
ACCOUNT = "123456789012"


@pytest.fixture
def enforced(aws_env: None) -> Iterator[IamEnforcement]:
    logging.getLogger("moto.stepfunctions.parser").setLevel(logging.CRITICAL)
    imported_before = set(sys.modules)
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        seams.install()
        enforcement = IamEnforcement(REGION)
        iam_calls.SEAM.attach(enforcement)
        try:
            with LambdaRuntime(region=REGION, time_scale=TimeScale(1.0), extra_sys_path=[TOY_HANDLERS]):
                yield enforcement
        finally:
            iam_calls.SEAM.detach(enforcement)
            seams.uninstall()
            for name in set(sys.modules) - imported_before:  # the toy handlers read env at import
                if name.startswith("sbx_"):
                    del sys.modules[name]


def _role(name: str, invokable: list[str]) -> str:
    iam = boto3.client("iam", region_name=REGION)
    arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(LAMBDA_TRUST))["Role"]["Arn"]
    if invokable:
        policy = {"Version": "2012-10-17",
                  "Statement": [{"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": invokable}]}
        iam.put_role_policy(RoleName=name, PolicyName="invoke", PolicyDocument=json.dumps(policy))
    return arn


def _function(name: str, handler: str) -> str:
    role = _role(f"{name}-role", [])
    return boto3.client("lambda", region_name=REGION).create_function(
        FunctionName=name, Runtime="python3.11", Role=role, Handler=handler, Code={"ZipFile": placeholder_zip()}, Timeout=30,
    )["FunctionArn"]


def _run(machine_role: str, function_arn: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Start a one-task machine and wait for its end; what the execution and its history say."""
    sfn = boto3.client("stepfunctions", region_name=REGION)
    definition = {"StartAt": "Call", "States": {"Call": {"Type": "Task", "Resource": function_arn, "End": True}}}
    name = f"m{time.monotonic_ns()}"
    machine = sfn.create_state_machine(name=name, definition=json.dumps(definition), roleArn=machine_role)
    execution = sfn.start_execution(stateMachineArn=machine["stateMachineArn"], input=json.dumps(payload))
    deadline = time.monotonic() + 60
    while (described := sfn.describe_execution(executionArn=execution["executionArn"]))["status"] == "RUNNING":
        assert time.monotonic() < deadline, "the execution never ended"
        time.sleep(0.02)
    history = sfn.get_execution_history(executionArn=execution["executionArn"])["events"]
    return {
        "status": described["status"],
        "output": json.loads(described.get("output") or "null"),
        "error": described.get("error"),
        "cause": _without_request_id(described.get("cause")),
        "events": [e["type"] for e in history],
    }


def _without_request_id(cause: str | None) -> Any:
    """A failed invocation's error document names its request, which differs between two runs."""
    try:
        document = json.loads(cause or "")
    except ValueError:
        return cause
    return {k: v for k, v in document.items() if k != "requestId"} if isinstance(document, dict) else document


def _both_ways(monkeypatch: pytest.MonkeyPatch, machine_role: str, function_arn: str,
               payload: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    seam = lambda_eval_utils._invoke_lambda_function
    assert getattr(seam, "__pipeops_seam__", False), "the seam is installed"
    direct = _run(machine_role, function_arn, payload)
    monkeypatch.setattr(lambda_eval_utils, "_invoke_lambda_function", seam.__wrapped__)
    through_client = _run(machine_role, function_arn, payload)
    monkeypatch.setattr(lambda_eval_utils, "_invoke_lambda_function", seam)
    return direct, through_client


def _lambda_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    original = BaseClient._make_api_call

    def counting(client: Any, operation: str, params: Any) -> Any:
        if client.meta.service_model.service_name == "lambda":
            calls.append(operation)
        return original(client, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", counting)
    return calls


def test_a_task_gets_its_functions_answer_without_a_client_round_trip(
    enforced: IamEnforcement, monkeypatch: pytest.MonkeyPatch
) -> None:
    echo = _function("echo", "sbx_echo.handler")
    role = _role("machine", [echo])
    calls = _lambda_calls(monkeypatch)

    direct = _run(role, echo, {"tag": "x"})

    assert calls == []
    assert direct["status"] == "SUCCEEDED"
    assert direct["output"]["event"] == {"tag": "x"} and direct["output"]["function_name"] == "echo"
    assert "LambdaFunctionSucceeded" in direct["events"]
    assert [c.action for c in enforced.calls if c.kind == "state_machine"] == ["lambda:InvokeFunction"]


def test_a_task_ends_the_same_way_through_the_seam_and_through_the_client(
    enforced: IamEnforcement, monkeypatch: pytest.MonkeyPatch
) -> None:
    echo, failing = _function("echo", "sbx_echo.handler"), _function("failing", "sbx_raise.handler")
    role = _role("machine", [echo, failing])

    ok_direct, ok_client = _both_ways(monkeypatch, role, echo, {"tag": "same"})
    failed_direct, failed_client = _both_ways(monkeypatch, role, failing, {"key": "k"})

    assert ok_direct["status"] == ok_client["status"] == "SUCCEEDED"
    assert ok_direct["output"]["event"] == ok_client["output"]["event"] == {"tag": "same"}
    assert ok_direct["events"] == ok_client["events"]
    assert failed_direct["status"] == "FAILED"
    assert failed_direct == failed_client
    assert failed_direct["error"] == "PipelineRetryableError"


def test_a_role_without_invoke_fails_the_task_as_the_client_call_did(
    enforced: IamEnforcement, monkeypatch: pytest.MonkeyPatch
) -> None:
    echo = _function("echo", "sbx_echo.handler")
    role = _role("machine", [])  # may invoke nothing

    direct, through_client = _both_ways(monkeypatch, role, echo, {"tag": "denied"})

    assert direct["status"] == "FAILED"
    assert direct == through_client
    denied = [c for c in enforced.denied() if c.kind == "state_machine"]
    assert len(denied) == 2 and {c.action for c in denied} == {"lambda:InvokeFunction"}


def test_a_function_moto_does_not_know_is_answered_by_moto(
    enforced: IamEnforcement, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:missing"
    role = _role("machine", [missing])
    calls = _lambda_calls(monkeypatch)

    direct, through_client = _both_ways(monkeypatch, role, missing, {})

    assert direct["status"] == "FAILED"
    assert direct == through_client
    assert calls == ["Invoke", "Invoke"]  # the seam handed it to the client: moto words the error


def test_an_answer_over_motos_bound_is_motos_size_error() -> None:
    over = json.dumps({"blob": "x" * lambda_tasks.MOTO_RESPONSE_BOUND}).encode()

    response = lambda_tasks.invocation_response(over, {})

    assert response["FunctionError"] == "Unhandled"
    assert response["Payload"]["errorType"] == "Function.ResponseSizeTooLarge"


def test_an_answer_carries_the_functions_error_and_its_decoded_payload() -> None:
    assert lambda_tasks.invocation_response(b'{"a": 1}', {}) == {"StatusCode": 200, "Payload": {"a": 1}}
    assert lambda_tasks.invocation_response(b'"text"', {"x-amz-function-error": "Unhandled"}) == {
        "StatusCode": 200, "Payload": "text", "FunctionError": "Unhandled",
    }
