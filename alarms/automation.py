"""The SSM Automation documents, one per acting runbook, built from the runbook and alarm catalogs.

Each document runs the runbook Lambda (RunbookFunction: the same code as `pipeops runbook run`):
diagnose with DryRun true, end there unless DryRun is false, wait for an approval, then apply.
DryRun defaults to true, so starting a document changes nothing unless asked. Each document takes
the selection its CLI counterpart takes (`engine.selections`: Groups, Holders, Runs, GraceSeconds)
and hands it to both invocations. With the template parameter AutoRemediate set to "true", an
alarm of a reconciler runbook going to ALARM starts its document as a dry run only (`AUTO_STARTED`):
the evidence lands in the execution, a person approves any action; no alarm starts a redrive.
`pipeops template build` writes these resources into template.yaml with the alarms.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from alarms.catalog import AlarmSpec
from alarms.cloudformation import alarm_name
from pipeline.stack import Function
from runbooks.automation.engine import ACTING_RUNBOOKS, selections
from runbooks.automation.remedies import RECONCILER
from runbooks.automation.remedy_request import Selection
from runbooks.catalog import Runbook

AUTOMATION_ROLE = "RunbookAutomationRole"
AUTO_REMEDIATE_ROLE = "RunbookAutoRemediateRole"
AUTO_REMEDIATE_CONDITION = "AutoRemediateOn"  # template.yaml: AutoRemediate is "true"
DIAGNOSE, BRANCH, APPROVE, APPLY = "diagnose", "applyOrEnd", "approve", "apply"


def _pascal(runbook: Runbook) -> str:
    return "".join(part.capitalize() for part in runbook.value.split("-"))


def document_id(runbook: Runbook) -> str:
    return f"RunbookDocument{_pascal(runbook)}"


def document_name(runbook: Runbook) -> str:
    """The document's name, given (not generated) so that the AutoRemediate rules and their role
    name it without a reference to the document resource; `Fn::Sub` text."""
    return f"${{AWS::StackName}}-runbook-{runbook.value}"


# The document parameter of each selection: typed as the function event reads it (handler.py).
SELECTION_PARAMETERS: dict[Selection, dict[str, Any]] = {
    Selection.GROUPS: {
        "type": "StringList",
        "default": [],
        "description": "The DLQ groups to act on (ids from the diagnose step's evidence); empty: every group.",
    },
    Selection.HOLDERS: {
        "type": "StringList",
        "default": [],
        "description": "The holders to release (from the diagnose step's evidence). Required to apply: "
        "with none named the apply changes nothing (the guard suspects the observer).",
    },
    Selection.RUNS: {
        "type": "StringList",
        "default": [],
        "description": "The failed runs to re-run, ids job_id@started_at from the diagnose step's candidates; "
        "empty: nothing is re-run.",
    },
    Selection.GRACE_SECONDS: {
        "type": "String",
        "default": "",
        "allowedPattern": "^[0-9]{0,6}$",
        "description": "How old a holder or run must be to act on, in seconds; empty: the router's timeout plus a margin.",
    },
}


def _invoke(runbook: Runbook, *, dry_run: bool, next_step: str | None, function: str = Function.RUNBOOK.value) -> dict[str, Any]:
    """A RunbookFunction invocation (or `function`'s, answering alike: a sidecar's reconciler) whose
    verdict, evidence and exit code become step outputs. InputPayload keeps each parameter's type
    (a StringList arrives as a list)."""
    payload: dict[str, Any] = {"RunbookId": runbook.value, "DryRun": dry_run}
    payload |= {selection.value: f"{{{{ {selection.value} }}}}" for selection in selections(runbook)}
    step: dict[str, Any] = {
        "name": DIAGNOSE if dry_run else APPLY,
        "action": "aws:invokeLambdaFunction",
        "onFailure": "Abort",
        "inputs": {"FunctionName": {"Ref": function}, "InputPayload": payload},
        "outputs": [
            {"Name": "verdict", "Selector": "$.Payload.verdict", "Type": "String"},
            {"Name": "exit_code", "Selector": "$.Payload.exit_code", "Type": "Integer"},
            {"Name": "evidence", "Selector": "$.Payload.evidence", "Type": "StringMap"},
            {"Name": "error", "Selector": "$.Payload.error", "Type": "String"},  # "" unless the verdict is error
        ],
    }
    if next_step is None:
        step["isEnd"] = True
    else:
        step["nextStep"] = next_step
    return step


def content(runbook: Runbook, function: str = Function.RUNBOOK.value) -> dict[str, Any]:
    """The document (schemaVersion 0.3): diagnose, branch on DryRun, approve, apply (`function`
    runs both)."""
    return {
        "schemaVersion": "0.3",
        "description": f"pipeops runbook {runbook.value}: {runbook.page_title}. Dry run unless DryRun is false; "
        f"an approval comes before any change. Page: runbooks/{runbook.value}.md",
        "assumeRole": "{{ AutomationAssumeRole }}",
        "parameters": {
            "DryRun": {"type": "Boolean", "default": True, "description": "Diagnose and plan only (the default)."},
            "AutomationAssumeRole": {
                "type": "String",
                "default": {"Fn::GetAtt": [AUTOMATION_ROLE, "Arn"]},
                "description": "The role the automation runs as: it may only invoke the runbook function.",
            },
            "Approvers": {
                "type": "StringList",
                "description": "Who may approve the apply (IAM users, roles or groups); asked only when DryRun is false.",
            },
        }
        | {selection.value: copy.deepcopy(SELECTION_PARAMETERS[selection]) for selection in selections(runbook)},
        "mainSteps": [
            _invoke(runbook, dry_run=True, next_step=BRANCH, function=function),
            {
                "name": BRANCH,
                "action": "aws:branch",
                "isEnd": True,  # no choice matched: DryRun is true, the diagnosis is the result
                "inputs": {"Choices": [{"NextStep": APPROVE, "Variable": "{{ DryRun }}", "BooleanEquals": False}]},
            },
            {
                "name": APPROVE,
                "action": "aws:approve",
                "onFailure": "Abort",
                "nextStep": APPLY,
                "inputs": {
                    "Approvers": "{{ Approvers }}",
                    "MinRequiredApprovals": 1,
                    "Message": f"Apply the plan of runbook {runbook.value}: see the {DIAGNOSE} step's outputs.",
                },
            },
            _invoke(runbook, dry_run=False, next_step=None, function=function),
        ],
        "outputs": [f"{step}.{name}" for step in (DIAGNOSE, APPLY) for name in ("verdict", "exit_code", "evidence", "error")],
    }


def _roles(functions: Sequence[str] = (Function.RUNBOOK.value,)) -> dict[str, Any]:
    """The role the documents run as: it may invoke the functions that run them, nothing else."""
    arns = [{"Fn::GetAtt": [function, "Arn"]} for function in functions]
    return {
        AUTOMATION_ROLE: {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "AssumeRolePolicyDocument": _assumed_by("ssm.amazonaws.com"),
                "Policies": [_policy("invoke-runbook-function", ["lambda:InvokeFunction"], arns[0] if len(arns) == 1 else arns)],
            },
        }
    }


def _assumed_by(service: str) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}],
    }


def _policy(name: str, actions: list[str], resource: Any) -> dict[str, Any]:
    return {
        "PolicyName": name,
        "PolicyDocument": {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": resource}]},
    }


def _definition_arn(runbook: Runbook) -> dict[str, Any]:
    return {
        "Fn::Sub": f"arn:${{AWS::Partition}}:ssm:${{AWS::Region}}:${{AWS::AccountId}}:automation-definition/{document_name(runbook)}:$DEFAULT"
    }


# The documents an alarm may start by itself (as a dry run): the reconciler's, which diagnose and
# whose apply is the scheduled reconciler's own. Never a redrive (a DLQ redriven before its cause is
# fixed fails again) nor a re-run (the same): a person starts those.
AUTO_STARTED: tuple[Runbook, ...] = tuple(runbook for runbook in ACTING_RUNBOOKS if runbook in RECONCILER)


def _auto_remediation(specs: Sequence[AlarmSpec], runbooks: Sequence[Runbook] = ACTING_RUNBOOKS) -> dict[str, Any]:
    """Per safe runbook its alarms name (of those with a document, `runbooks`): a rule that starts
    its document, DryRun true only."""
    alarms = {runbook: [alarm_name(spec.name_suffix) for spec in specs if spec.runbook is runbook] for runbook in AUTO_STARTED}
    started = [runbook for runbook in AUTO_STARTED if alarms[runbook] and runbook in runbooks]
    role = f"${{{AUTOMATION_ROLE}.Arn}}"
    pass_role = _policy("pass-automation-role", ["iam:PassRole"], {"Fn::GetAtt": [AUTOMATION_ROLE, "Arn"]})
    pass_role["PolicyDocument"]["Statement"][0]["Condition"] = {"StringEquals": {"iam:PassedToService": "ssm.amazonaws.com"}}
    out: dict[str, Any] = {
        AUTO_REMEDIATE_ROLE: {
            "Type": "AWS::IAM::Role",
            "Condition": AUTO_REMEDIATE_CONDITION,
            "Properties": {
                "AssumeRolePolicyDocument": _assumed_by("events.amazonaws.com"),
                "Policies": [
                    _policy("start-runbook-documents", ["ssm:StartAutomationExecution"], [_definition_arn(r) for r in started]),
                    pass_role,
                ],
            },
        }
    }
    for runbook in started:
        out[f"RunbookAutoRemediate{_pascal(runbook)}"] = {
            "Type": "AWS::Events::Rule",
            "Condition": AUTO_REMEDIATE_CONDITION,
            "Properties": {
                "Description": f"An alarm of runbook {runbook.value} in ALARM: its document, as a dry run.",
                "EventPattern": {
                    "source": ["aws.cloudwatch"],
                    "detail-type": ["CloudWatch Alarm State Change"],
                    "detail": {"alarmName": alarms[runbook], "state": {"value": ["ALARM"]}},
                },
                "Targets": [
                    {
                        "Id": "document",
                        "Arn": _definition_arn(runbook),
                        "RoleArn": {"Fn::GetAtt": [AUTO_REMEDIATE_ROLE, "Arn"]},
                        # Never an apply: DryRun true. Approvers only because the document requires it.
                        "Input": {"Fn::Sub": json.dumps({"DryRun": ["true"], "AutomationAssumeRole": [role], "Approvers": [role]})},
                    }
                ],
            },
        }
    return out


def resources(
    specs: Sequence[AlarmSpec],
    *,
    runbooks: Sequence[Runbook] = ACTING_RUNBOOKS,
    function: str = Function.RUNBOOK.value,
    run_by: Mapping[Runbook, str] | None = None,
) -> dict[str, Any]:
    """Every acting runbook's document (or those of `runbooks`, run by `function`, or by the function
    `run_by` names for a runbook: a sidecar's), the role they run as, and the optional alarm rules."""
    runner = {runbook: (run_by or {}).get(runbook, function) for runbook in runbooks}
    documents = {
        document_id(runbook): {
            "Type": "AWS::SSM::Document",
            "Properties": {
                "Name": {"Fn::Sub": document_name(runbook)},
                # A named document is updated in place: a new version, made the default.
                "UpdateMethod": "NewVersion",
                "DocumentType": "Automation",
                "DocumentFormat": "JSON",
                "Content": content(runbook, runner[runbook]),
            },
        }
        for runbook in runbooks
    }
    return documents | _roles(list(dict.fromkeys(runner.values())) or [function]) | _auto_remediation(specs, runbooks)
