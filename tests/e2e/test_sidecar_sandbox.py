"""The sidecar beside a pipeline we did not build, in the sandbox: the example counter pipeline
(examples/counter-pipeline/template.yaml, its own stack, its own handlers) deployed, then the template
`pipeops sidecar build` makes from its pipeops.toml deployed beside it. None of the example's
resources changes, and the sidecar's reconciler runs there under its own least-privilege role."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pipeline.stores.audit import AuditStore
from pipeops.cli import app
from pipeops.sidecar.demo import (
    EXAMPLE,
    PIPELINE_STACK,
    counter,
    deploy_sidecar,
    most_running_at_once,
    sidecar_alarms,
    succeeded,
)
from sandbox.faults.specs import CallCrash
from tests.conftest import eventually
from tests.conftest import invoke_function as invoke

pytestmark = pytest.mark.slow

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


def test_the_sidecar_deploys_beside_the_example_and_changes_none_of_its_resources(counter_example: Any, tmp_path: Path) -> None:
    sandbox = counter_example
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


def test_a_stall_at_the_max_pages_and_the_scheduled_sidecar_repairs_it(counter_example: Any, tmp_path: Path) -> None:
    """The seed design's failure: the processor dies after its increment, before StartExecution, as
    often as there are slots; the counter sits at the max with nothing running and every document
    waits. The sidecar's SlotsFullIdle pages, its scheduled reconciler (legacy mode, two agreeing
    observations) sets the counter to the executions running, the stalled documents run, never more
    than the max at once, and every alarm of the sidecar returns to OK."""
    sandbox = counter_example
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
