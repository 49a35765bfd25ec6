"""`alert-delivery` on the sandbox stack (runbooks.automation.engine.run_runbook): it fails while the
page topic has no subscription, passes once a queue is subscribed (moto confirms it), fails when
the reconciler's schedule is disabled or the topic's key refuses CloudWatch, and never changes
anything, even with `apply`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from alarms.catalog import DEFAULT_RUNBOOK_BASE_URL
from alarms.live import list_alarms
from pipeops.cli import app
from runbooks.automation.engine import run_runbook
from runbooks.automation.result import RunbookResult, Verdict
from stack.resources import StackResources
from tests.conftest import envelope, subscribe_a_queue

pytestmark = pytest.mark.slow


def alert_delivery(sandbox: Any, *, apply: bool = False) -> RunbookResult:
    resources = StackResources.from_outputs(sandbox.stack_name, dict(sandbox.outputs))
    return run_runbook("alert-delivery", resources, sandbox, apply=apply)


def failed_checks(result: RunbookResult) -> list[str]:
    return [check["id"] for check in result.evidence["checks"] if not check["ok"]]


def cloudwatch_may_use(key_id: str, account: str) -> str:
    root = {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{account}:root"}, "Action": "kms:*", "Resource": "*"}
    cloudwatch = {
        "Effect": "Allow",
        "Principal": {"Service": "cloudwatch.amazonaws.com"},
        "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
        "Resource": "*",
    }
    return json.dumps({"Version": "2012-10-17", "Statement": [root, cloudwatch]})


def test_alert_delivery_fails_without_a_subscription_and_passes_with_one(sandbox: Any) -> None:
    unsubscribed = alert_delivery(sandbox, apply=True)  # apply changes nothing: human steps only
    assert (unsubscribed.verdict, unsubscribed.exit_code) == (Verdict.REMAINS, 1), unsubscribed.to_dict()
    assert failed_checks(unsubscribed) == ["confirmed-subscription"]
    assert [action.action.target for action in unsubscribed.actions] == ["confirmed-subscription"]
    assert unsubscribed.evidence["subscriptions"] == []

    doctor = CliRunner().invoke(app, ["doctor"])  # the same checks, as a table
    assert doctor.exit_code == 1 and "confirmed-subscription" in doctor.output and "FAIL" in doctor.output

    subscribe_a_queue(sandbox)
    subscribed = alert_delivery(sandbox)
    assert (subscribed.verdict, subscribed.exit_code, failed_checks(subscribed)) == (Verdict.ABSENT, 0, [])
    doctor = CliRunner().invoke(app, ["doctor", "--json"])
    assert doctor.exit_code == 0, doctor.output
    assert envelope(doctor.output, "doctor")["verdict"] == "absent"
    [composite] = next(c for c in subscribed.evidence["checks"] if c["id"] == "composite-pages")["names"]
    assert composite == f"{sandbox.stack_name}-PipelineUnhealthy"

    rule = sandbox.deployment.resources["ReconcilerFunctionSchedule"]
    sandbox.client("events").disable_rule(Name=rule)
    disabled = alert_delivery(sandbox)
    assert (disabled.exit_code, failed_checks(disabled)) == (1, ["reconciler-schedule"])
    sandbox.client("events").enable_rule(Name=rule)

    kms, sns = sandbox.client("kms"), sandbox.client("sns")
    key = kms.create_key(Description="alarm topics")["KeyMetadata"]
    topic = sandbox.deployment.resources["AlarmTopic"]
    sns.set_topic_attributes(TopicArn=topic, AttributeName="KmsMasterKeyId", AttributeValue=key["Arn"])
    refused = alert_delivery(sandbox)  # the default key policy: the account's IAM only
    assert (refused.exit_code, failed_checks(refused)) == (1, ["topic-key"])
    kms.put_key_policy(KeyId=key["KeyId"], PolicyName="default", Policy=cloudwatch_may_use(key["KeyId"], key["AWSAccountId"]))
    assert alert_delivery(sandbox).exit_code == 0


def test_the_deployed_descriptions_link_their_runbook_pages(sandbox: Any) -> None:
    """RunbookBaseUrl substituted by the deploy; `alarms list` still names each alarm's runbook."""
    cloudwatch = sandbox.client("cloudwatch")
    [dlq] = cloudwatch.describe_alarms(AlarmNames=[f"{sandbox.stack_name}-DlqNotEmpty"])["MetricAlarms"]
    assert dlq["AlarmDescription"].endswith(f"Runbook: {DEFAULT_RUNBOOK_BASE_URL}/dlq-messages.md")
    runbooks = {view.name.removeprefix(f"{sandbox.stack_name}-"): view.runbook for view in list_alarms(cloudwatch, sandbox.stack_name)}
    assert runbooks["DlqNotEmpty"] == "dlq-messages" and runbooks["PipelineUnhealthy"] == ""
    assert all(runbooks[name] for name in runbooks if name != "PipelineUnhealthy")
