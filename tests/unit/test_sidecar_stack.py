"""A sidecar stack is recognised by its outputs; what is wrong on it is said once (pure parts)."""

from __future__ import annotations

from typing import Any

import pytest

from alarms.live import runbook_of
from pipeops.sidecar.build import alarm_specs, build_template
from pipeops.sidecar.config import loads
from pipeops.sidecar.live import described, findings
from stack.resources import (
    SIDECAR_MARKER,
    SidecarStack,
    SidecarStackError,
    StackNotFoundError,
    StackResources,
)
from stack.template import PROJECT_ROOT

EXAMPLE = PROJECT_ROOT / "examples" / "counter-pipeline" / "pipeops.toml"
OUTPUTS = {
    SIDECAR_MARKER: "counter-pipeline",
    "ReconcilerFunctionName": "side-Reconciler-1",
    "SidecarTableName": "side-Table-1",
    "AlarmTopicArn": "arn:aws:sns:us-east-1:123456789012:t",
    "WatchedDeadLetterQueues": "a-dlq,b-dlq",
}


def test_the_built_template_carries_the_marker_and_the_dead_letter_queues() -> None:
    outputs = build_template(loads(EXAMPLE.read_text(encoding="utf-8")))["Outputs"]
    assert outputs[SIDECAR_MARKER] == {"Value": "counter-pipeline"}
    assert outputs["WatchedDeadLetterQueues"] == {"Value": "counter-pipeline-docs-dlq"}


def test_a_sidecar_stack_is_read_from_its_outputs() -> None:
    sidecar = SidecarStack.from_outputs("side", OUTPUTS)
    assert sidecar == SidecarStack("side", "counter-pipeline", "side-Reconciler-1", "side-Table-1", ("a-dlq", "b-dlq"))
    assert SidecarStack.from_outputs("side", OUTPUTS | {"WatchedDeadLetterQueues": "-"}).dead_letter_queues == ()


def test_a_command_that_needs_the_pipelines_tables_names_the_sidecar_and_what_works() -> None:
    with pytest.raises(SidecarStackError) as raised:
        StackResources.from_outputs("side", OUTPUTS)
    message = str(raised.value)
    assert "'side' is the pipeops sidecar of 'counter-pipeline'" in message and "`pipeops status`" in message
    with pytest.raises(StackNotFoundError, match="is it a pipeops stack"):  # no marker: as before
        StackResources.from_outputs("other", {"SomeOutput": "x"})


def test_findings_say_each_thing_once_the_alarm_first() -> None:
    result = {"verdict": "repair", "reason": "counter 3, 0 running", "slots_full_idle": True, "implausible": ""}
    firing = [{"name": "SlotsFullIdle", "alarm": "side-SlotsFullIdle", "reason": "Threshold", "runbook": "slots-full-idle"}]
    found = findings(result, {"a-dlq": 2, "b-dlq": 0}, firing)
    assert [(f.name, f.target) for f in found] == [
        ("SlotsFullIdle", "side-SlotsFullIdle"),
        ("DeadLetterQueueMessages", "a-dlq"),
        ("CounterDrift", "counter"),
    ]
    assert findings({"verdict": "in_sync", "implausible": ""}, {"a-dlq": 0}, []) == []


def _deployed(value: Any) -> str:
    """A reconciler environment value as CloudFormation resolves it (the example's own expressions)."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_deployed(part) for part in parts)
    if "Fn::Sub" in value:
        names = {"${AWS::Partition}": "aws", "${AWS::Region}": "us-east-1", "${AWS::AccountId}": "123456789012"}
        text = str(value["Fn::Sub"])
        for name, resolved in names.items():
            text = text.replace(name, resolved)
        return text
    return "resolved-ref"


def test_a_deployed_sidecars_alarms_name_the_runbooks_of_its_build() -> None:
    config = loads(EXAMPLE.read_text(encoding="utf-8"))
    template = build_template(config)
    outputs = {name: _deployed(output["Value"]) for name, output in template["Outputs"].items()}
    sidecar = SidecarStack.from_outputs("side", outputs)
    assert sidecar.watched_functions == ("counter-pipeline-sender:30", "counter-pipeline-processor:30")
    variables = template["Resources"]["ReconcilerFunction"]["Properties"]["Environment"]["Variables"]
    rebuilt = alarm_specs(described(sidecar, {name: _deployed(value) for name, value in variables.items()}))
    built = alarm_specs(config)
    assert [(s.logical_id, s.runbook, s.summary) for s in rebuilt] == [(s.logical_id, s.runbook, s.summary) for s in built]
    deployed = [
        resource["Properties"]["AlarmName"]["Fn::Sub"].replace("${AWS::StackName}", "side")
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::CloudWatch::Alarm"
    ]
    runbooks = {name: runbook_of(name, "side", rebuilt) for name in deployed}
    assert runbooks["side-CounterPipelineDocsDlqNotEmpty"] == "dlq-messages"
    assert runbooks["side-CounterPipelineSenderErrors"] == "function-errors"
    assert runbooks["side-ExecutionsFailed"] == "executions-failed"
    assert all(runbooks.values()), [name for name, runbook in runbooks.items() if not runbook]
    assert runbook_of("side-CounterPipelineDocsDlqNotEmpty", "side") == ""  # the reference catalog has no such alarm
