"""The sidecar beside a pipeline we did not build, in the sandbox: the example counter pipeline
(examples/counter-pipeline/template.yaml, its own stack, its own handlers) deployed, then the template
`pipeops sidecar build` makes from its pipeops.toml deployed beside it. None of the example's
resources changes, and the sidecar's reconciler runs there under its own least-privilege role."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pipeline.stores.audit import AuditStore
from pipeops.cli import app
from pipeops.sidecar.build import build
from sandbox.clock import TimeScale
from sandbox.deploy import Deployment, deploy
from sandbox.faults.specs import CallCrash
from stack.template import PROJECT_ROOT
from tests.conftest import eventually

pytestmark = pytest.mark.slow

EXAMPLE = PROJECT_ROOT / "examples" / "counter-pipeline"
PIPELINE_STACK, SIDECAR_STACK = "counter-pipeline", "counter-sidecar"
KEY = {"counter_id": {"S": "workflow_counter"}}


def resources_in_depth(sandbox: Any, stack: str) -> dict[str, Any]:
    """Every resource of `stack` with what AWS says of it now (the parts a sidecar could change)."""
    cfn, found = sandbox.client("cloudformation"), {}
    for resource in cfn.describe_stack_resources(StackName=stack)["StackResources"]:
        kind, physical = resource["ResourceType"], resource["PhysicalResourceId"]
        found[resource["LogicalResourceId"]] = {"type": kind, "id": physical, "state": describe(sandbox, kind, physical)}
    return found


def describe(sandbox: Any, kind: str, physical: str) -> Any:
    if kind == "AWS::SQS::Queue":
        attributes = sandbox.client("sqs").get_queue_attributes(QueueUrl=physical, AttributeNames=["All"])["Attributes"]
        return {k: v for k, v in attributes.items() if not k.startswith("ApproximateNumberOf")}
    if kind == "AWS::DynamoDB::Table":
        table = sandbox.client("dynamodb").describe_table(TableName=physical)["Table"]
        return {k: table.get(k) for k in ("KeySchema", "AttributeDefinitions", "BillingModeSummary", "TableArn")}
    if kind == "AWS::Lambda::Function":
        config = sandbox.client("lambda").get_function_configuration(FunctionName=physical)
        return {k: config.get(k) for k in ("Handler", "Role", "Timeout", "Environment", "MemorySize", "Runtime")}
    if kind == "AWS::StepFunctions::StateMachine":
        machine = sandbox.client("stepfunctions").describe_state_machine(stateMachineArn=physical)
        return {k: machine.get(k) for k in ("definition", "roleArn", "name")}
    if kind == "AWS::IAM::Role":
        iam = sandbox.client("iam")
        names = iam.list_role_policies(RoleName=physical)["PolicyNames"]
        return {name: iam.get_role_policy(RoleName=physical, PolicyName=name)["PolicyDocument"] for name in names}
    if kind == "AWS::Lambda::EventSourceMapping":
        mapping = sandbox.client("lambda").get_event_source_mapping(UUID=physical)
        return {k: mapping.get(k) for k in ("EventSourceArn", "FunctionArn", "BatchSize", "State")}
    return None


def counter(sandbox: Any) -> int:
    item = sandbox.client("dynamodb").get_item(TableName="counter-pipeline-concurrency", Key=KEY, ConsistentRead=True).get("Item") or {}
    return int(item.get("active_count", {}).get("N", "0"))


def invoke(sandbox: Any, function: str, payload: dict[str, Any]) -> dict[str, Any]:
    answer = sandbox.client("lambda").invoke(FunctionName=function, Payload=json.dumps(payload).encode())
    body = json.loads(answer["Payload"].read() or b"null")
    assert "FunctionError" not in answer, body
    return dict(body or {})


def succeeded(sandbox: Any) -> int:
    sfn = sandbox.client("stepfunctions")
    arn = next(m["stateMachineArn"] for m in sfn.list_state_machines()["stateMachines"] if m["name"] == "counter-pipeline-workflow")
    return len(sfn.list_executions(stateMachineArn=arn, statusFilter="SUCCEEDED")["executions"])


# Handlers read the real clock: two observations this many real seconds apart (well after the
# SlotsFullIdle alarm's two reconciler periods, 2.4 s real at the time scale 0.02).
GRACE_SECONDS = "10"


def deploy_sidecar(sandbox: Any, tmp_path: Path) -> Deployment:
    """`pipeops sidecar build` of the example's pipeops.toml, deployed as its own stack."""
    out = tmp_path / "sidecar.yaml"
    build(EXAMPLE / "pipeops.toml", out, check=False, code_uri=str(PROJECT_ROOT))
    return deploy(
        SIDECAR_STACK, template_path=out, region=sandbox.region, endpoint_url=sandbox.endpoint_url,
        time_scale=sandbox.time_scale, parameters={"ReconcileSchedule": "rate(1 minute)", "ReconcileGraceSeconds": GRACE_SECONDS},
    )  # fmt: skip


@pytest.fixture
def example(make_sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The example pipeline's stack deployed in a running sandbox, its handlers importable there
    (virtual time at 0.02: the sidecar's alarms wait out reconciler periods)."""
    sandbox = make_sandbox(time_scale=TimeScale(0.02))
    monkeypatch.syspath_prepend(str(EXAMPLE / "handlers"))
    deploy(
        PIPELINE_STACK, template_path=EXAMPLE / "template.yaml", region=sandbox.region,
        endpoint_url=sandbox.endpoint_url, time_scale=sandbox.time_scale,
    )  # fmt: skip
    sandbox.poller.refresh()
    yield sandbox
    for module in ("counter_sender", "counter_processor"):
        sys.modules.pop(module, None)


def test_the_sidecar_deploys_beside_the_example_and_changes_none_of_its_resources(example: Any, tmp_path: Path) -> None:
    sandbox = example
    invoke(sandbox, "counter-pipeline-sender", {"documents": ["a.pdf", "b.pdf"]})
    eventually(lambda: succeeded(sandbox) == 2 and counter(sandbox) == 0, "both documents processed, the counter back to 0")
    before = resources_in_depth(sandbox, PIPELINE_STACK)
    doctor = CliRunner().invoke(app, ["sidecar", "doctor", "--config", str(EXAMPLE / "pipeops.toml")])
    assert doctor.exit_code == 0, doctor.output  # every resource pipeops.toml names is there

    sidecar = deploy_sidecar(sandbox, tmp_path)

    assert resources_in_depth(sandbox, PIPELINE_STACK) == before
    # The sidecar's reconciler runs under its own role (the sandbox enforces it) and sees the pipeline.
    result = invoke(sandbox, sidecar.resources["ReconcilerFunction"], {"dry_run": True})
    assert (result["verdict"], result["max"], result["implausible"]) == ("in_sync", 3, "")
    assert result["observed"]["active_count"] == 0
    assert resources_in_depth(sandbox, PIPELINE_STACK) == before


def sidecar_alarms(sandbox: Any) -> dict[str, str]:
    pages = sandbox.client("cloudwatch").get_paginator("describe_alarms").paginate(
        AlarmNamePrefix=f"{SIDECAR_STACK}-", AlarmTypes=["MetricAlarm", "CompositeAlarm"]
    )
    return {
        alarm["AlarmName"].removeprefix(f"{SIDECAR_STACK}-"): alarm["StateValue"]
        for page in pages
        for alarm in page.get("MetricAlarms", []) + page.get("CompositeAlarms", [])
    }


def most_running_at_once(sandbox: Any) -> int:
    """From every execution's start and stop: the most that ran at one moment (a stop before a
    start at the same instant)."""
    sfn = sandbox.client("stepfunctions")
    arn = next(m["stateMachineArn"] for m in sfn.list_state_machines()["stateMachines"] if m["name"] == "counter-pipeline-workflow")
    edges = []
    for execution in sfn.list_executions(stateMachineArn=arn)["executions"]:
        edges.append((execution["startDate"], 1))
        if execution.get("stopDate"):
            edges.append((execution["stopDate"], -1))
    running = most = 0
    for _, step in sorted(edges):
        running += step
        most = max(most, running)
    return most


def test_a_stall_at_the_max_pages_and_the_scheduled_sidecar_repairs_it(example: Any, tmp_path: Path) -> None:
    """The seed design's failure: the processor dies after its increment, before StartExecution, as
    often as there are slots; the counter sits at the max with nothing running and every document
    waits. The sidecar's SlotsFullIdle pages, its scheduled reconciler (legacy mode, two agreeing
    observations) sets the counter to the executions running, the stalled documents run, never more
    than the max at once, and every alarm of the sidecar returns to OK."""
    sandbox = example
    sidecar = deploy_sidecar(sandbox, tmp_path)
    sandbox.faults.inject(
        CallCrash(name="processor-dies", function="counter-pipeline-processor", service="dynamodb", operation="UpdateItem", when="after")
    )
    invoke(sandbox, "counter-pipeline-sender", {"documents": ["a.pdf", "b.pdf", "c.pdf"]})
    eventually(lambda: counter(sandbox) == 3, "three increments whose processors died")
    sandbox.faults.clear("processor-dies")
    invoke(sandbox, "counter-pipeline-sender", {"documents": ["d.pdf", "e.pdf"]})
    assert succeeded(sandbox) == 0

    eventually(lambda: sidecar_alarms(sandbox).get("SlotsFullIdle") == "ALARM", "SlotsFullIdle pages", timeout=300)
    assert counter(sandbox) == 3 and succeeded(sandbox) == 0  # paged before anything was repaired
    eventually(
        lambda: succeeded(sandbox) == 5,
        "the stalled documents all ran after the repair",
        timeout=300,
    )
    eventually(lambda: counter(sandbox) == 0, "the counter back to 0")
    assert most_running_at_once(sandbox) <= 3

    since = datetime.now(UTC) - timedelta(days=1)
    [repair] = AuditStore(sidecar.resources["SidecarTable"], sandbox.client("dynamodb")).history(since).records
    assert repair.action == "set_count" and repair.by.endswith(sidecar.resources["ReconcilerFunction"])
    assert repair.before["active_count"] == 3 and repair.after == {"active_count": 0}

    def all_ok() -> bool:
        states = sidecar_alarms(sandbox)
        return states.get("SlotsFullIdle") == "OK" and "ALARM" not in states.values()

    eventually(all_ok, "every alarm of the sidecar back to OK", timeout=300)
