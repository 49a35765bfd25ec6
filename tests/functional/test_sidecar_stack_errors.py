"""A sidecar stack whose reconciler cannot be read: each command that serves a sidecar says so in one
line and exits 2 (never a traceback, never "nothing wrong")."""

from __future__ import annotations

import json

import boto3
import pytest
from typer.testing import CliRunner

from pipeops.cli import app
from stack.resources import SIDECAR_MARKER

TEMPLATE = {
    "Resources": {"Queue": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "watched-dlq"}}},
    "Outputs": {
        SIDECAR_MARKER: {"Value": "someone-elses-pipeline"},
        "ReconcilerFunctionName": {"Value": "no-such-function"},
        "SidecarTableName": {"Value": "no-such-table"},
        "WatchedDeadLetterQueues": {"Value": "watched-dlq"},
    },
}


@pytest.mark.parametrize(
    "command",
    [["status"], ["reconcile"], ["failures"], ["runbook", "run", "counter-drift"]],
)
def test_a_sidecar_whose_reconciler_is_gone_is_one_line_and_exit_2(aws: None, command: list[str]) -> None:
    boto3.client("cloudformation").create_stack(StackName="side", TemplateBody=json.dumps(TEMPLATE))
    result = CliRunner().invoke(app, [*command, "--stack-name", "side"])
    assert result.exit_code == 2, result.output
    assert "no-such-function" in result.output and "Traceback" not in result.output, result.output
