"""The SSM Automation documents in template.yaml: one per acting runbook, safe by default."""

from __future__ import annotations

from typing import Any

import pytest

from alarms.automation import AUTO_REMEDIATE_CONDITION, AUTOMATION_ROLE, document_id
from pipeline.stack import Function
from runbooks.automation.engine import ACTING_RUNBOOKS, selections
from runbooks.automation.remedies import DIAGNOSE_ONLY
from runbooks.catalog import Runbook
from stack.template import load_template

RESOURCES: dict[str, Any] = load_template()["Resources"]
DOCUMENTS = {name: r for name, r in RESOURCES.items() if r["Type"] == "AWS::SSM::Document"}


def test_every_acting_runbook_and_no_other_has_a_document() -> None:
    assert set(DOCUMENTS) == {document_id(runbook) for runbook in ACTING_RUNBOOKS}
    assert not DIAGNOSE_ONLY & set(ACTING_RUNBOOKS) and Runbook.ALERT_DELIVERY not in ACTING_RUNBOOKS
    assert {Runbook.DLQ_MESSAGES, Runbook.COUNTER_DRIFT, Runbook.EXECUTIONS_FAILED} <= set(ACTING_RUNBOOKS)


@pytest.mark.parametrize("runbook", ACTING_RUNBOOKS, ids=str)
def test_a_document_is_a_dry_run_unless_asked_and_approved(runbook: Runbook) -> None:
    document = DOCUMENTS[document_id(runbook)]["Properties"]
    assert document["DocumentType"] == "Automation"
    content = document["Content"]
    assert content["schemaVersion"] == "0.3" and content["assumeRole"] == "{{ AutomationAssumeRole }}"
    assert content["parameters"]["DryRun"] == {"type": "Boolean", "default": True, "description": content["parameters"]["DryRun"]["description"]}
    steps = content["mainSteps"]
    actions = [step["action"] for step in steps]
    assert actions == ["aws:invokeLambdaFunction", "aws:branch", "aws:approve", "aws:invokeLambdaFunction"]
    diagnose, branch, approve, apply = steps
    selection = {name: f"{{{{ {name} }}}}" for name in selections(runbook)}
    assert diagnose["inputs"]["InputPayload"] == {"RunbookId": runbook.value, "DryRun": True} | selection
    assert apply["inputs"]["InputPayload"] == {"RunbookId": runbook.value, "DryRun": False} | selection
    assert set(selection) <= set(content["parameters"])
    assert diagnose["nextStep"] == branch["name"]
    # Only DryRun false leads on, and only to the approval; the approval is the way to the apply.
    assert branch["isEnd"] is True and branch["inputs"]["Choices"] == [
        {"NextStep": approve["name"], "Variable": "{{ DryRun }}", "BooleanEquals": False}
    ]
    assert approve["nextStep"] == apply["name"] and approve["onFailure"] == "Abort"
    assert [s for s in steps if s.get("nextStep") == apply["name"]] == [approve]
    assert {f"{diagnose['name']}.verdict", f"{diagnose['name']}.evidence", f"{apply['name']}.verdict"} <= set(content["outputs"])


def test_the_automation_role_may_only_invoke_the_runbook_function() -> None:
    [policy] = RESOURCES[AUTOMATION_ROLE]["Properties"]["Policies"]
    assert policy["PolicyDocument"]["Statement"] == [
        {"Effect": "Allow", "Action": ["lambda:InvokeFunction"], "Resource": {"Fn::GetAtt": [Function.RUNBOOK.value, "Arn"]}}
    ]


def test_auto_remediation_is_off_by_default_and_starts_dry_runs_only() -> None:
    template = load_template()
    assert template["Parameters"]["AutoRemediate"]["Default"] == "false"
    rules = {name: r for name, r in RESOURCES.items() if r["Type"] == "AWS::Events::Rule" and name.startswith("RunbookAutoRemediate")}
    assert rules
    for rule in rules.values():
        assert rule["Condition"] == AUTO_REMEDIATE_CONDITION
        assert rule["Properties"]["EventPattern"]["detail"]["state"] == {"value": ["ALARM"]}
        [target] = rule["Properties"]["Targets"]
        assert '"DryRun": ["true"]' in target["Input"]["Fn::Sub"]
    # Only the reconciler's documents: never a redrive nor a re-run.
    assert {name.removeprefix("RunbookAutoRemediate") for name in rules} == {
        "CounterDrift",
        "SlotsFullIdle",
        "BacklogStalled",
        "ImplausibleDrift",
    }
