"""The runbook automation as AWS runs it, on the sandbox: the SSM Automation documents are deployed
and RunbookFunction (what they invoke) diagnoses, then applies, a DLQ redrive."""

from __future__ import annotations

import json
from typing import Any

import pytest

from alarms.automation import document_id
from runbooks.automation.engine import ACTING_RUNBOOKS
from tests.conftest import depth, job_message, put, runs, send

pytestmark = pytest.mark.slow


def invoke(sandbox: Any, payload: dict[str, Any]) -> dict[str, Any]:
    answer = sandbox.client("lambda").invoke(FunctionName=sandbox.outputs["RunbookFunctionName"], Payload=json.dumps(payload))
    assert "FunctionError" not in answer, answer["Payload"].read()
    result: dict[str, Any] = json.loads(answer["Payload"].read())
    return result


def test_the_documents_are_deployed_and_the_function_dry_runs_then_applies(sandbox: Any) -> None:
    ssm = sandbox.client("ssm")
    for runbook in ACTING_RUNBOOKS:
        name = sandbox.deployment.resources[document_id(runbook)]
        assert ssm.describe_document(Name=name)["Document"]["DocumentType"] == "Automation"

    put(sandbox, "done-1.txt")
    assert sandbox.wait_until_idle(180)
    [ended] = runs(sandbox)
    send(sandbox, "DeadLetterQueueUrl", job_message(sandbox, ended.run))  # redelivered after its run ended

    dry = invoke(sandbox, {"RunbookId": "dlq-messages", "DryRun": True})
    assert dry["exit_code"] == 1 and dry["verdict"] == "remains", dry
    assert [g["reason"] for g in dry["evidence"]["groups"]] == ["run_complete"]
    assert depth(sandbox, "DeadLetterQueueUrl") == 1

    applied = invoke(sandbox, {"RunbookId": "dlq-messages", "DryRun": False})
    assert applied["exit_code"] == 0, applied
    assert applied["verified"]["remaining"] == 0 and applied["applied"] is True
    assert depth(sandbox, "DeadLetterQueueUrl") == 0
