"""The sandbox enforces IAM: a call outside a role's policies fails with AccessDenied, as on AWS.

The probe handler below stands in for a handler that calls something its role does not allow:
a function's Handler is pointed at it (the role stays the function's own, as deployed), and it
makes the AWS call its event names with the pipeline's own shared clients (`pipeline.aws`).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import pytest
from botocore.client import BaseClient
from botocore.exceptions import ClientError

from sandbox.iam import IamSandboxError
from sandbox.iam_enforcement import IamEnforcement
from sandbox.seams import iam_calls

PROBE_HANDLER = f"{__name__}.probe"
FUNCTION_OUTPUTS = {
    "IngestFunction": "IngestFunctionName",
    "RouterFunction": "RouterFunctionName",
    "BatchTriggerFunction": "BatchTriggerFunctionName",
    "WorkflowTrackerFunction": "WorkflowTrackerFunctionName",
    "DetectFunction": "DetectFunctionName",
    "GenerateSyntheticFunction": "GenerateSyntheticFunctionName",
    "RedactFunction": "RedactFunctionName",
    "FinalizeFunction": "FinalizeFunctionName",
}
IDLE_TIMEOUT = 120.0
PII = "Write to john.doe@example.com or call 415-555-0142; card 4111 1111 1111 1111.\n"


def probe(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Make the call `event` names ({"service", "method", "params"}) as a handler would; with
    "via": "thread" / "pool", on a thread / ThreadPoolExecutor task the handler starts."""
    from pipeline.aws import client

    def call() -> Any:
        return getattr(client(event["service"]), event["method"])(**event["params"])

    try:
        if event.get("via") == "pool":
            with ThreadPoolExecutor(max_workers=2) as pool:
                response = pool.submit(call).result()
        elif event.get("via") == "thread":
            outcome: list[Any] = []
            worker = threading.Thread(target=lambda: outcome.append(_capture(call)))
            worker.start()
            worker.join()
            response = outcome[0]
            if isinstance(response, BaseException):
                raise response
        else:
            response = call()
    except ClientError as exc:
        return {
            "error": exc.response["Error"]["Code"],
            "message": exc.response["Error"]["Message"],
            "status": exc.response["ResponseMetadata"]["HTTPStatusCode"],
            "modeled": type(exc).__name__,
        }
    response.pop("ResponseMetadata", None)
    return {"ok": True}


def _capture(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except BaseException as exc:
        return exc


def as_probe(sandbox: Any, function_output: str) -> str:
    """The function, now running the probe under its own deployed role."""
    name = sandbox.outputs[function_output]
    sandbox.client("lambda").update_function_configuration(FunctionName=name, Handler=PROBE_HANDLER)
    return name


def run_probe(sandbox: Any, function: str, service: str, method: str, via: str = "", **params: Any) -> Any:
    event = {"service": service, "method": method, "params": params, "via": via}
    return sandbox.runtime.invoke_direct(function, event)


def role_of(sandbox: Any, function_output: str) -> str:
    config = sandbox.client("lambda").get_function_configuration(
        FunctionName=sandbox.outputs[function_output]
    )
    return config["Role"]


def tracking_key(
    job_id: str = "iam-probe/", started_at: str = "2026-01-01T00:00:00.000000Z"
) -> dict[str, Any]:
    return {"job_id": {"S": job_id}, "started_at": {"S": started_at}}


# --------------------------------------------------------------------------- refused as on AWS


def test_a_call_outside_the_role_fails_with_access_denied_and_never_reaches_moto(sandbox: Any) -> None:
    table = sandbox.outputs["TrackingTableName"]
    sandbox.client("dynamodb").put_item(TableName=table, Item={**tracking_key(), "note": {"S": "keep me"}})
    tracker = as_probe(sandbox, "WorkflowTrackerFunctionName")

    result = run_probe(sandbox, tracker, "dynamodb", "delete_item", TableName=table, Key=tracking_key())

    assert not result.errored
    assert result.payload["error"] == "AccessDeniedException"
    assert result.payload["status"] == 400
    role_name = role_of(sandbox, "WorkflowTrackerFunctionName").rsplit("/", 1)[-1]
    table_arn = f"arn:aws:dynamodb:{sandbox.region}:123456789012:table/{table}"
    assert result.payload["message"] == (
        f"User: arn:aws:sts::123456789012:assumed-role/{role_name}/{tracker} is not authorized to perform: "
        f"dynamodb:DeleteItem on resource: {table_arn} "
        "because no identity-based policy allows the dynamodb:DeleteItem action"
    )
    item = sandbox.client("dynamodb").get_item(TableName=table, Key=tracking_key(), ConsistentRead=True)
    assert item["Item"]["note"] == {"S": "keep me"}, "the refused call was never made"
    [record] = [c for c in sandbox.iam.calls if c.principal == tracker]
    assert (record.kind, record.action, record.resource, record.allowed) == (
        "function",
        "dynamodb:DeleteItem",
        table_arn,
        False,
    )
    assert record.decision == "implicit deny"

    # What the role allows goes through, from the same function.
    result = run_probe(sandbox, tracker, "dynamodb", "get_item", TableName=table, Key=tracking_key())
    assert result.payload == {"ok": True}
    assert sandbox.iam.calls[-1].allowed


def test_an_uncaught_denial_fails_the_invocation_as_the_python_runtime_reports_it(
    sandbox: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real handler path with a narrowed role: ingest may no longer send to the main queue."""
    iam = sandbox.client("iam")
    role_name = role_of(sandbox, "IngestFunctionName").rsplit("/", 1)[-1]
    [name] = [
        n for n in iam.list_role_policies(RoleName=role_name)["PolicyNames"] if n.endswith("RolePolicy0")
    ]
    document = _document(iam.get_role_policy(RoleName=role_name, PolicyName=name)["PolicyDocument"])
    document["Statement"] = [s for s in document["Statement"] if s["Action"] != "sqs:SendMessage"]
    document["Version"] = "2012-10-17"  # the API wants it; SAM's generated policies carry none
    iam.put_role_policy(RoleName=role_name, PolicyName=name, PolicyDocument=json.dumps(document))

    sandbox.client("s3").put_object(
        Bucket=sandbox.outputs["InputBucketName"], Key="denied.txt", Body=PII.encode()
    )
    ingest = sandbox.outputs["IngestFunctionName"]
    failed = _wait_for(
        lambda: [r for r in sandbox.runtime.invocations if r.function_name == ingest and r.errored]
    )

    payload = json.loads(failed[0].payload)
    assert payload["errorType"] == "ClientError"
    assert re.search(
        r"\(AccessDenied\) when calling the SendMessage operation: User: arn:aws:sts::123456789012:assumed-role/"
        rf"{role_name}/{ingest} is not authorized to perform: sqs:sendmessage on resource: arn:aws:sqs:",
        payload["errorMessage"],
    ), payload["errorMessage"]
    assert any(c.action == "sqs:SendMessage" and not c.allowed for c in sandbox.iam.calls)


def test_the_state_machines_own_service_integrations_are_checked_against_its_role(sandbox: Any) -> None:
    iam = sandbox.client("iam")
    sfn = sandbox.client("stepfunctions")
    machine = sandbox.outputs["StateMachineArn"]
    role_name = sfn.describe_state_machine(stateMachineArn=machine)["roleArn"].rsplit("/", 1)[-1]
    for name in iam.list_role_policies(RoleName=role_name)["PolicyNames"]:
        if "dynamodb:UpdateItem" in str(
            iam.get_role_policy(RoleName=role_name, PolicyName=name)["PolicyDocument"]
        ):
            iam.delete_role_policy(RoleName=role_name, PolicyName=name)

    sandbox.client("s3").put_object(
        Bucket=sandbox.outputs["InputBucketName"], Key="sfn-denied.txt", Body=PII.encode()
    )
    assert sandbox.wait_until_idle(IDLE_TIMEOUT)

    [execution] = sfn.list_executions(stateMachineArn=machine)["executions"]
    assert execution["status"] == "FAILED"
    history = sfn.get_execution_history(executionArn=execution["executionArn"])["events"]
    errors = [e["taskFailedEventDetails"]["error"] for e in history if e["type"] == "TaskFailed"]
    assert errors and set(errors) == {"DynamoDB.AccessDeniedException"}, errors
    denied = [c for c in sandbox.iam.denied() if c.kind == "state_machine"]
    assert denied and {c.action for c in denied} == {"dynamodb:UpdateItem"}
    assert denied[0].principal == machine.rsplit(":", 1)[-1]
    assert denied[0].role_arn.endswith(f"/{role_name}")


def test_a_missing_object_is_403_not_404_without_list_bucket_as_s3_answers(sandbox: Any) -> None:
    detect = as_probe(sandbox, "DetectFunctionName")
    bucket = sandbox.outputs["InputBucketName"]

    result = run_probe(sandbox, detect, "s3", "get_object", Bucket=bucket, Key="never-uploaded.txt")
    assert (result.payload["error"], result.payload["status"]) == ("AccessDenied", 403)

    sandbox.client("iam").put_role_policy(
        RoleName=role_of(sandbox, "DetectFunctionName").rsplit("/", 1)[-1],
        PolicyName="MayListTheInputBucket",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{bucket}"}
                ],
            }
        ),
    )
    result = run_probe(sandbox, detect, "s3", "get_object", Bucket=bucket, Key="never-uploaded.txt")
    assert (result.payload["error"], result.payload["modeled"]) == ("NoSuchKey", "NoSuchKey")


def test_a_lost_detection_result_is_accounted_as_missing_not_refused(
    make_sandbox: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finalize reads the result a file's task stored (a failure, or a summary too large to hand
    back) and treats "no such key" as a missing result (ResultMissing). S3 says "no such key"
    only to a caller that may list the bucket: to any other it answers 403 AccessDenied, and the
    run failed instead of accounting for the file (found here: Finalize had no s3:ListBucket on
    the bucket)."""
    import pipeline.handlers.detect as detect_handler

    real_hand_back = detect_handler.hand_back
    lost = "lost/b.txt"

    class ResultWriteLost:
        def write_result(self, execution_name: str, phase: str, result: dict[str, Any]) -> str:
            return "never-written"  # the write "succeeds" but the result never reaches S3

    def hand_back_losing_the_write(event: Any, artifacts: Any, result: Any) -> Any:
        if event["file_key"] == lost:
            return real_hand_back(event, ResultWriteLost(), result)
        return real_hand_back(event, artifacts, result)

    monkeypatch.setattr("pipeline.handlers.detect.hand_back", hand_back_losing_the_write)
    sandbox = make_sandbox(RedactionMode="synthetic")
    # Not UTF-8: its detection fails, and a failed result is always stored, never handed back.
    _upload(sandbox, {"lost/a.txt": PII, lost: b"\xff\xfe not text", "lost/c.txt": PII})
    assert sandbox.wait_until_idle(IDLE_TIMEOUT)

    assert [(c.principal, c.action, c.resource) for c in sandbox.iam.denied()] == []
    listed = {c.principal for c in sandbox.iam.calls if c.action == "s3:ListBucket"}
    assert sandbox.outputs["FinalizeFunctionName"] in listed, "Finalize read a missing result"
    assert _run_statuses(sandbox) == {"lost/": {"COMPLETE"}}
    [item] = _run_items(sandbox)
    failed = json.dumps(item.get("failed_files", {}))
    assert "ResultMissing" in failed and lost in failed, failed


def test_lost_findings_read_as_no_such_key_not_refused(make_sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """GenerateSynthetic and Redact read the findings detection stored for each file at their
    deterministic key. A lost findings object must fail them with what S3 says to a caller that
    may list the bucket -- NoSuchKey -- not 403 AccessDenied: the job that loses findings before
    its mapping is made fails naming the missing key; the one that loses them before a file's
    redaction accounts for that file as failed, with NoSuchKey in its message."""
    import pipeline.handlers.generate_synthetic as generate_handler
    import pipeline.handlers.redact as redact_handler
    from pipeline.artifacts import findings_key

    real_generate = generate_handler.generate_synthetic
    real_redact = redact_handler.redact_file
    sandbox = make_sandbox(RedactionMode="synthetic")

    def lose_findings(execution_name: str, file_key: str) -> None:
        sandbox.client("s3").delete_object(  # the sandbox's own client: not the function's call
            Bucket=sandbox.outputs["WorkBucketName"], Key=findings_key(execution_name, file_key)
        )

    def generate_after_a_loss(event: Any, *args: Any, **kwargs: Any) -> Any:
        if event["job_id"] == "before-mapping/":
            lose_findings(event["execution_name"], "before-mapping/b.txt")
        return real_generate(event, *args, **kwargs)

    def redact_after_a_loss(event: Any, *args: Any, **kwargs: Any) -> Any:
        if event["file_key"] == "before-redaction/b.txt":
            lose_findings(event["execution_name"], event["file_key"])
        return real_redact(event, *args, **kwargs)

    monkeypatch.setattr("pipeline.handlers.generate_synthetic.generate_synthetic", generate_after_a_loss)
    monkeypatch.setattr("pipeline.handlers.redact.redact_file", redact_after_a_loss)
    _upload(
        sandbox,
        {
            "before-mapping/a.txt": PII,
            "before-mapping/b.txt": PII,
            "before-redaction/a.txt": PII,
            "before-redaction/b.txt": PII,
            "before-redaction/c.txt": PII,
        },
    )
    assert sandbox.wait_until_idle(IDLE_TIMEOUT)

    assert [(c.principal, c.action, c.resource) for c in sandbox.iam.denied()] == []
    listed = {c.principal for c in sandbox.iam.calls if c.action == "s3:ListBucket"}
    readers = ("GenerateSyntheticFunctionName", "RedactFunctionName")
    assert {sandbox.outputs[output] for output in readers} <= listed, "each read missing findings"
    items = {item["job_id"]["S"]: item for item in _run_items(sandbox)}
    assert {job: item["status"]["S"] for job, item in items.items()} == {
        "before-mapping/": "FAILED",
        "before-redaction/": "COMPLETE",
    }
    cause = items["before-mapping/"]["cause"]["S"]
    assert "NoSuchKey" in cause and "AccessDenied" not in cause, cause
    [failure] = items["before-redaction/"]["failed_files"]["M"]["redact"]["L"]
    assert failure["M"]["key"]["S"] == "before-redaction/b.txt", failure
    message = failure["M"]["message"]["S"]
    assert "NoSuchKey" in message and "AccessDenied" not in message, message


def test_an_operation_the_sandbox_cannot_decide_is_refused_loudly(sandbox: Any) -> None:
    tracker = as_probe(sandbox, "WorkflowTrackerFunctionName")
    result = run_probe(sandbox, tracker, "dynamodb", "execute_statement", Statement="SELECT * FROM t")
    assert result.errored and result.error_type == IamSandboxError.__name__
    assert "dynamodb:ExecuteStatement" in result.payload["errorMessage"]
    assert sandbox.iam.calls[-1].decision.startswith("error: ")


def test_enforcement_can_be_turned_off(aws_env: None) -> None:
    from pipeline.handlers import _wiring
    from sandbox.sandbox import Sandbox

    with Sandbox(enforce_iam=False) as sandbox:
        _wiring.reset()
        assert sandbox.iam is None and not iam_calls.SEAM.attached()
        table = sandbox.outputs["TrackingTableName"]
        tracker = as_probe(sandbox, "WorkflowTrackerFunctionName")
        result = run_probe(sandbox, tracker, "dynamodb", "delete_item", TableName=table, Key=tracking_key())
        assert result.payload == {"ok": True}, "moto's own behaviour: nothing is checked"
    _wiring.reset()


def test_a_served_sandbox_refuses_too(aws_env: None) -> None:
    """Handlers call the server over HTTP: the check runs in their thread before the request."""
    from pipeline.aws import reset_clients
    from pipeline.handlers import _wiring
    from sandbox.sandbox import Sandbox

    reset_clients()
    with Sandbox(serve=True) as sandbox:
        _wiring.reset()
        table = sandbox.outputs["TrackingTableName"]
        tracker = as_probe(sandbox, "WorkflowTrackerFunctionName")
        result = run_probe(sandbox, tracker, "dynamodb", "delete_item", TableName=table, Key=tracking_key())
        assert result.payload["error"] == "AccessDeniedException"
        # The sandbox's own clients and plain boto3 with no function behind it are not checked.
        plain = boto3.client("dynamodb", endpoint_url=sandbox.endpoint_url, region_name=sandbox.region)
        plain.delete_item(TableName=table, Key=tracking_key())
        assert all(c.principal == tracker for c in sandbox.iam.calls)
    reset_clients()
    _wiring.reset()


# --------------------------------------------------------------------------- every path, nothing denied


def test_every_handler_path_stays_within_its_role(make_sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Realtime (blackout) and batch (synthetic) mode through every handler: nothing is denied.

    Covers a folder and root files, an empty and an unsupported file, a file whose detection
    fails (its job completes), a root file whose detection fails (its job fails: the tracker on
    failure as well as on success), one slot for three jobs (the router waits by re-queueing),
    the batch trigger on its schedule. Blackout redacts in detection's pass (Detect writes the
    output); synthetic mode redacts in RedactFunction, there an empty file, a file whose
    detection failed (skipped) and files with findings.
    """
    import pipeline.handlers.detect as detect_handler

    real_detect = detect_handler.detect_file
    poisoned = {"claims/broken.txt", "lonely-broken.txt", "batch-a/broken.txt"}

    def detect_or_raise(event: Any, *args: Any, **kwargs: Any) -> Any:
        if event["file_key"] in poisoned:
            raise RuntimeError("the parser choked on this file (injected)")
        return real_detect(event, *args, **kwargs)

    monkeypatch.setattr("pipeline.handlers.detect.detect_file", detect_or_raise)

    realtime = make_sandbox(RedactionMode="blackout", MaxConcurrentWorkflows="1")
    _upload(
        realtime,
        {
            "claims/a.txt": PII,
            "claims/b.txt": "nothing personal\n",
            "claims/empty.txt": "",
            "claims/scan.png": "not really a png",
            "claims/broken.txt": PII,
            "root.txt": PII,
            "lonely-broken.txt": PII,
        },
    )
    assert realtime.wait_until_idle(IDLE_TIMEOUT)
    statuses = _run_statuses(realtime)
    assert statuses.get("claims/") == {"COMPLETE"}, statuses
    assert statuses.get("root.txt") == {"COMPLETE"}, statuses
    assert statuses.get("lonely-broken.txt") == {"FAILED"}, statuses
    _assert_nothing_denied(
        realtime,
        expected_callers={
            "IngestFunction",
            "RouterFunction",
            "WorkflowTrackerFunction",
            "DetectFunction",
            "FinalizeFunction",
        },
    )
    realtime.stop()

    batch = make_sandbox(ProcessingMode="batch", RedactionMode="synthetic")
    _upload(
        batch,
        {
            "batch-a/one.txt": PII,
            "batch-a/two.txt": PII,
            "batch-a/empty.txt": "",
            "batch-a/broken.txt": PII,
            "loose.txt": PII,
        },
    )
    assert batch.wait_until_idle(IDLE_TIMEOUT)
    batch.bus.fire_schedule(_schedule_rule(batch))
    assert batch.wait_until_idle(IDLE_TIMEOUT)
    statuses = _run_statuses(batch)
    assert statuses == {"batch-a/": {"COMPLETE"}, "loose.txt": {"COMPLETE"}}, statuses
    _assert_nothing_denied(
        batch,
        expected_callers={
            "BatchTriggerFunction",
            "RouterFunction",
            "WorkflowTrackerFunction",
            "DetectFunction",
            "GenerateSyntheticFunction",
            "RedactFunction",
            "FinalizeFunction",
        },
    )


def _assert_nothing_denied(sandbox: Any, expected_callers: set[str]) -> None:
    calls = sandbox.iam.calls
    denied = [(c.principal, c.operation, c.action, c.resource, c.decision) for c in calls if not c.allowed]
    assert denied == []
    logical = {sandbox.outputs[output]: name for name, output in FUNCTION_OUTPUTS.items()}
    checked: dict[str, set[str]] = {}
    for call in calls:
        who = (
            logical.get(call.principal, call.principal) if call.kind == "function" else "PipelineStateMachine"
        )
        checked.setdefault(who, set()).add(call.action)
    missing = (expected_callers | {"PipelineStateMachine"}) - set(checked)
    assert not missing, f"no checked call from {missing}: {checked}"
    assert {"lambda:InvokeFunction", "dynamodb:UpdateItem"} <= checked["PipelineStateMachine"]
    failures = [
        (r.function_name, r.error_type)
        for r in sandbox.runtime.invocations
        if r.errored and "AccessDenied" in r.payload
    ]
    assert failures == []


def _upload(sandbox: Any, files: dict[str, str | bytes]) -> None:
    s3 = sandbox.client("s3")
    for key, body in files.items():
        data = body if isinstance(body, bytes) else body.encode()
        s3.put_object(Bucket=sandbox.outputs["InputBucketName"], Key=key, Body=data)


def _run_items(sandbox: Any) -> list[dict[str, Any]]:
    """The runs' tracking items (head items skipped), as DynamoDB returns them."""
    pages = (
        sandbox.client("dynamodb")
        .get_paginator("scan")
        .paginate(TableName=sandbox.outputs["TrackingTableName"])
    )
    return [item for page in pages for item in page["Items"] if "status" in item]


def _run_statuses(sandbox: Any) -> dict[str, set[str]]:
    """job id -> the statuses of its runs (head items skipped)."""
    statuses: dict[str, set[str]] = {}
    pages = (
        sandbox.client("dynamodb")
        .get_paginator("scan")
        .paginate(TableName=sandbox.outputs["TrackingTableName"])
    )
    for page in pages:
        for item in page["Items"]:
            if "status" in item:
                statuses.setdefault(item["job_id"]["S"], set()).add(item["status"]["S"])
    return statuses


def _schedule_rule(sandbox: Any) -> str:
    events = sandbox.client("events")
    function_arn = sandbox.client("lambda").get_function(
        FunctionName=sandbox.outputs["BatchTriggerFunctionName"]
    )["Configuration"]["FunctionArn"]
    names = events.list_rule_names_by_target(TargetArn=function_arn)["RuleNames"]
    [rule] = [n for n in names if events.describe_rule(Name=n).get("ScheduleExpression")]
    return rule


def _wait_for(found: Callable[[], list[Any]], timeout: float = 60.0) -> list[Any]:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = found()
        if result:
            return result
        time.sleep(0.05)
    pytest.fail("the expected invocation never happened")


def _document(raw: Any) -> dict[str, Any]:
    """A role policy as IAM's API returns it (moto answers a CloudFormation one as a Python repr)."""
    import ast

    if isinstance(raw, dict):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return ast.literal_eval(raw)


# --------------------------------------------------------------------------- the seam itself


def test_the_seam_is_counted_and_restores_botocore() -> None:
    original = BaseClient.__dict__["_make_api_call"]
    first, second = IamEnforcement("us-east-1"), IamEnforcement("us-east-1")
    iam_calls.SEAM.attach(first)
    iam_calls.SEAM.attach(second)
    try:
        assert BaseClient.__dict__["_make_api_call"] is not original
        iam_calls.SEAM.detach(first)
        assert iam_calls.SEAM.attached()
        assert BaseClient.__dict__["_make_api_call"] is not original
    finally:
        iam_calls.SEAM.detach(second)
        iam_calls.SEAM.detach(first)  # a second uninstall is harmless
    assert BaseClient.__dict__["_make_api_call"] is original
    assert not iam_calls.SEAM.attached()


@pytest.mark.parametrize("via", ["thread", "pool"])
def test_threads_a_handler_starts_call_as_the_function(sandbox: Any, via: str) -> None:
    """Python gives a new thread an empty context; the sandbox gives it the handler's, as AWS
    gives it the function's credentials: its calls are checked, not let through."""
    table = sandbox.outputs["TrackingTableName"]
    tracker = as_probe(sandbox, "WorkflowTrackerFunctionName")
    result = run_probe(
        sandbox, tracker, "dynamodb", "delete_item", via=via, TableName=table, Key=tracking_key()
    )
    assert result.payload["error"] == "AccessDeniedException", result.payload
    result = run_probe(sandbox, tracker, "dynamodb", "get_item", via=via, TableName=table, Key=tracking_key())
    assert result.payload == {"ok": True}
    assert [(c.principal, c.action, c.allowed) for c in sandbox.iam.calls] == [
        (tracker, "dynamodb:DeleteItem", False),
        (tracker, "dynamodb:GetItem", True),
    ]
