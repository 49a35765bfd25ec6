"""AutoRemediate on the sandbox stack: the alarm rules exist only with AutoRemediate=true, start
only the reconciler documents (never a redrive nor a re-run) as dry runs, and their role may do
no more than that (decided by the sandbox's IAM model over the roles as deployed).

What moto cannot show, so no test here claims it: EventBridge never starts an SSM Automation
execution (moto stores the rule and its target and delivers nothing to SSM), SSM never executes
a document, and no alarm state change event is emitted (the sandbox's alarm engine notifies SNS
topics only). tests/e2e/test_ssm_documents_sandbox.py runs the documents' steps themselves."""

from __future__ import annotations

import json
from typing import Any

import pytest

from alarms.automation import AUTO_REMEDIATE_ROLE, AUTO_STARTED, AUTOMATION_ROLE, document_id
from alarms.catalog import pipeline_alarms
from runbooks.automation.engine import ACTING_RUNBOOKS
from runbooks.catalog import Runbook
from sandbox.iam import Request, evaluate

pytestmark = pytest.mark.slow


def rules_starting_documents(sandbox: Any) -> dict[str, dict[str, Any]]:
    """The stack's rules whose target is an SSM automation definition, by name, with their targets."""
    events = sandbox.client("events")
    found = {}
    for rule in events.list_rules(NamePrefix=sandbox.stack_name)["Rules"]:
        targets = events.list_targets_by_rule(Rule=rule["Name"])["Targets"]
        if any(":automation-definition/" in target["Arn"] for target in targets):
            found[rule["Name"]] = {"rule": rule, "targets": targets}
    return found


def role_policies(sandbox: Any, logical_id: str) -> tuple[Any, ...]:
    """The role's policies as deployed, parsed as the sandbox's IAM enforcement holds them."""
    role = sandbox.client("iam").get_role(RoleName=sandbox.deployment.resources[logical_id].rsplit("/", 1)[-1])["Role"]
    return tuple(sandbox.iam.policies(role["Arn"]))


def definition_arn(sandbox: Any, runbook: Runbook) -> str:
    return f"arn:aws:ssm:us-east-1:123456789012:automation-definition/{sandbox.deployment.resources[document_id(runbook)]}:$DEFAULT"


def test_no_rule_starts_a_document_by_default(sandbox: Any) -> None:
    assert rules_starting_documents(sandbox) == {}
    assert AUTO_REMEDIATE_ROLE not in sandbox.deployment.resources


def test_with_auto_remediate_the_reconciler_documents_alone_are_started_as_dry_runs(make_sandbox: Any) -> None:
    sandbox = make_sandbox(AutoRemediate="true")
    rules = rules_starting_documents(sandbox)
    started = {target["Arn"] for found in rules.values() for target in found["targets"]}
    assert started == {definition_arn(sandbox, runbook) for runbook in AUTO_STARTED}
    assert set(AUTO_STARTED) == {Runbook.COUNTER_DRIFT, Runbook.SLOTS_FULL_IDLE, Runbook.BACKLOG_STALLED, Runbook.IMPLAUSIBLE_DRIFT}

    from moto.events.models import EventPattern

    specs = pipeline_alarms()
    for found in rules.values():
        [target] = found["targets"]
        assert json.loads(target["Input"])["DryRun"] == ["true"]
        assert target["RoleArn"].rsplit("/", 1)[-1] == sandbox.deployment.resources[AUTO_REMEDIATE_ROLE].rsplit("/", 1)[-1]
        pattern = found["rule"]["EventPattern"]
        runbook = next(r for r in AUTO_STARTED if target["Arn"] == definition_arn(sandbox, r))
        for spec in specs:  # each alarm of the stack: only its own runbook's rule matches it going to ALARM
            event = {
                "id": "1",
                "account": "123456789012",
                "region": "us-east-1",
                "time": "2026-12-03T12:00:00Z",
                "resources": [],
                "source": "aws.cloudwatch",
                "detail-type": "CloudWatch Alarm State Change",
                "detail": {"alarmName": f"{sandbox.stack_name}-{spec.name_suffix}", "state": {"value": "ALARM"}},
            }
            matched = EventPattern.load(pattern).matches_event(event)  # type: ignore[arg-type]  # moto has no TestEventPattern: its rules' own matcher
            assert matched is (spec.runbook is runbook), (spec.name_suffix, runbook)

    policies = role_policies(sandbox, AUTO_REMEDIATE_ROLE)
    for runbook in ACTING_RUNBOOKS:  # a redrive or a re-run document: refused to the rules' role
        request = Request("ssm:StartAutomationExecution", definition_arn(sandbox, runbook))
        assert evaluate(policies, request).allowed is (runbook in AUTO_STARTED), runbook
    automation_role = sandbox.client("iam").get_role(RoleName=sandbox.deployment.resources[AUTOMATION_ROLE].rsplit("/", 1)[-1])["Role"]["Arn"]
    to_ssm = Request("iam:PassRole", automation_role, {"iam:PassedToService": ("ssm.amazonaws.com",)})
    to_lambda = Request("iam:PassRole", automation_role, {"iam:PassedToService": ("lambda.amazonaws.com",)})
    assert evaluate(policies, to_ssm).allowed and not evaluate(policies, to_lambda).allowed

    runbook_function = sandbox.client("lambda").get_function(FunctionName=sandbox.outputs["RunbookFunctionName"])["Configuration"]
    ingest_function = sandbox.client("lambda").get_function(FunctionName=sandbox.outputs["IngestFunctionName"])["Configuration"]
    automation = role_policies(sandbox, AUTOMATION_ROLE)
    assert evaluate(automation, Request("lambda:InvokeFunction", runbook_function["FunctionArn"])).allowed
    assert not evaluate(automation, Request("lambda:InvokeFunction", ingest_function["FunctionArn"])).allowed
