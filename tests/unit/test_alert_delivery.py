"""The alert-delivery verdict over plain evidence: each link of the path a notification travels,
and the result it makes (exit 0 when all hold, 1 with one human step per failed check)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from alarms.catalog import TOPIC
from runbooks.automation.alert_delivery import (
    PAGE_TOPIC,
    PENDING,
    SCHEDULE_RULE,
    AlarmActions,
    Evidence,
    judge,
    missing_key_actions,
    result_of,
)
from runbooks.automation.result import ActionResult, Verdict
from stack.template import load_template

TOPIC_ARN = "arn:aws:sns:us-east-1:123456789012:pipeops-AlarmTopic-X"
KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
CONFIRMED = f"{TOPIC_ARN}:0a1b2c3d"
ROOT = {"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::123456789012:root"}, "Action": "kms:*", "Resource": "*"}


def cloudwatch_may(*actions: str, effect: str = "Allow", service: Any = "cloudwatch.amazonaws.com") -> dict[str, Any]:
    return {"Effect": effect, "Principal": {"Service": service}, "Action": list(actions), "Resource": "*"}


def policy(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": [ROOT, *statements]}


HEALTHY = Evidence(
    topic_arn=TOPIC_ARN,
    subscriptions=(CONFIRMED,),
    alarms=(
        AlarmActions("pipeops-DlqNotEmpty", False, True, ("arn:aws:sns:us-east-1:123456789012:states",)),
        AlarmActions("pipeops-PipelineUnhealthy", True, True, (TOPIC_ARN,)),
    ),
    rule_name="pipeops-ReconcilerFunctionSchedule-1",
    rule_state="ENABLED",
)
GOOD_KEY = replace(
    HEALTHY,
    key_id=KEY,
    key_manager="CUSTOMER",
    key_policy=policy(cloudwatch_may("kms:Decrypt", "kms:GenerateDataKey*")),
)


def failed(evidence: Evidence) -> dict[str, str]:
    return {check.id: check.fix for check in judge(evidence) if not check.ok}


@pytest.mark.parametrize("evidence", [HEALTHY, GOOD_KEY], ids=["no key", "a key cloudwatch may use"])
def test_a_healthy_path_passes_every_check_and_exits_0(evidence: Evidence) -> None:
    checks = judge(evidence)
    assert [check.id for check in checks] == [
        "actions-enabled",
        "composite-pages",
        "topic-key",
        "confirmed-subscription",
        "reconciler-schedule",
    ]
    assert all(check.ok for check in checks)
    result = result_of(evidence, checks)
    assert (result.verdict, result.exit_code, list(result.plan), result.applied) == (Verdict.ABSENT, 0, [], False)
    assert result.id == "alert-delivery"


@pytest.mark.parametrize("subscriptions", [(), (PENDING,), (PENDING, PENDING)], ids=["none", "pending", "two pending"])
def test_a_topic_without_a_confirmed_subscription_fails_and_names_the_subscribe_step(subscriptions: tuple[str, ...]) -> None:
    evidence = replace(HEALTHY, subscriptions=subscriptions)
    assert list(failed(evidence)) == ["confirmed-subscription"]
    assert f"aws sns subscribe --topic-arn {TOPIC_ARN}" in failed(evidence)["confirmed-subscription"]
    result = result_of(evidence, judge(evidence))
    assert (result.verdict, result.exit_code) == (Verdict.REMAINS, 1)
    [action] = result.actions  # a human step: planned, never applied
    assert action.result is ActionResult.SKIPPED and action.action.target == "confirmed-subscription"


def test_one_confirmed_subscription_beside_pending_ones_is_enough() -> None:
    assert failed(replace(HEALTHY, subscriptions=(PENDING, CONFIRMED))) == {}


def test_muted_alarms_are_named_with_the_command_that_unmutes_them() -> None:
    muted = AlarmActions("pipeops-RouterFailures", False, False, ())
    evidence = replace(HEALTHY, alarms=(*HEALTHY.alarms, muted))
    [check] = [check for check in judge(evidence) if not check.ok]
    assert check.names == ("pipeops-RouterFailures",)
    assert check.fix == "aws cloudwatch enable-alarm-actions --alarm-names pipeops-RouterFailures"


def test_a_stack_without_alarms_fails() -> None:
    assert set(failed(replace(HEALTHY, alarms=()))) == {"actions-enabled", "composite-pages"}


@pytest.mark.parametrize(
    "composite",
    [
        AlarmActions("pipeops-PipelineUnhealthy", True, True, ("arn:aws:sns:us-east-1:123456789012:other",)),
        AlarmActions("pipeops-PipelineUnhealthy", True, False, (TOPIC_ARN,)),
    ],
    ids=["pages another topic", "muted"],
)
def test_the_composite_must_page_the_topic_with_its_actions_enabled(composite: AlarmActions) -> None:
    evidence = replace(HEALTHY, alarms=(HEALTHY.alarms[0], composite))
    assert "composite-pages" in failed(evidence)


def test_a_metric_alarm_paging_the_topic_is_no_composite() -> None:
    evidence = replace(HEALTHY, alarms=(AlarmActions("pipeops-X", False, True, (TOPIC_ARN,)),))
    assert list(failed(evidence)) == ["composite-pages"]


@pytest.mark.parametrize(
    "statements",
    [
        (cloudwatch_may("kms:*"),),
        (cloudwatch_may("kms:Decrypt"), cloudwatch_may("kms:GenerateDataKey")),
        (cloudwatch_may("KMS:DECRYPT", "kms:GenerateDataKey*", service=["cloudwatch.amazonaws.com", "sns.amazonaws.com"]),),
        ({"Effect": "Allow", "Principal": "*", "Action": "kms:*", "Resource": "*"},),
    ],
    ids=["kms:*", "two statements", "a list of services, any case", "everyone, unconditionally"],
)
def test_a_key_policy_that_lets_cloudwatch_decrypt_and_generate_data_keys_passes(statements: tuple[dict[str, Any], ...]) -> None:
    assert missing_key_actions(policy(*statements)) == []


@pytest.mark.parametrize(
    ("statements", "missing"),
    [
        ((), ["kms:Decrypt", "kms:GenerateDataKey"]),  # the default policy: the account's IAM only
        ((cloudwatch_may("kms:Decrypt"),), ["kms:GenerateDataKey"]),
        ((cloudwatch_may("kms:GenerateDataKeyWithoutPlaintext", "kms:Decrypt"),), ["kms:GenerateDataKey"]),
        ((cloudwatch_may("kms:*", service="events.amazonaws.com"),), ["kms:Decrypt", "kms:GenerateDataKey"]),
        ((cloudwatch_may("kms:*"), cloudwatch_may("kms:Decrypt", effect="Deny")), ["kms:Decrypt"]),
        (
            ({"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "kms:*", "Condition": {"StringEquals": {"x": "y"}}},),
            ["kms:Decrypt", "kms:GenerateDataKey"],
        ),
    ],
    ids=["account only", "no data keys", "the wrong data key action", "another service", "a deny wins", "a conditioned *"],
)
def test_a_key_policy_missing_cloudwatchs_grant_fails(statements: tuple[dict[str, Any], ...], missing: list[str]) -> None:
    assert missing_key_actions(policy(*statements)) == missing
    evidence = replace(GOOD_KEY, key_policy=policy(*statements))
    assert list(failed(evidence)) == ["topic-key"]
    assert "cloudwatch.amazonaws.com" in failed(evidence)["topic-key"] and "put-key-policy" in failed(evidence)["topic-key"]


@pytest.mark.parametrize(
    "evidence",
    [
        replace(HEALTHY, key_id="alias/aws/sns"),
        replace(HEALTHY, key_id=KEY, key_manager="AWS"),
        replace(HEALTHY, key_id=KEY, key_error="AccessDeniedException"),
    ],
    ids=["alias/aws/sns", "an AWS managed key", "a policy that cannot be read"],
)
def test_a_key_cloudwatch_cannot_be_shown_to_use_fails(evidence: Evidence) -> None:
    assert list(failed(evidence)) == ["topic-key"]


@pytest.mark.parametrize("state", ["DISABLED", ""], ids=["disabled", "not found"])
def test_the_reconciler_schedule_must_be_enabled(state: str) -> None:
    evidence = replace(HEALTHY, rule_state=state)
    assert list(failed(evidence)) == ["reconciler-schedule"]
    assert "aws events enable-rule" in failed(evidence)["reconciler-schedule"]


def test_every_failed_check_is_one_planned_human_step_and_the_evidence_lists_the_checks() -> None:
    evidence = replace(HEALTHY, subscriptions=(), rule_state="DISABLED")
    result = result_of(evidence, judge(evidence))
    assert [(a.kind, a.target) for a in result.plan] == [
        ("human_step", "confirmed-subscription"),
        ("human_step", "reconciler-schedule"),
    ]
    data = result.to_dict()
    assert [check["ok"] for check in data["evidence"]["checks"]] == [True, True, True, False, False]
    assert data["evidence"]["topic_arn"] == TOPIC_ARN and "key_policy" not in data["evidence"]


def test_the_logical_ids_read_are_the_templates() -> None:
    """The page topic is the alarm catalog's; the schedule rule is SAM's name for the reconciler's
    Schedule event (function logical id + event name)."""
    assert PAGE_TOPIC == TOPIC
    function, event = "ReconcilerFunction", SCHEDULE_RULE.removeprefix("ReconcilerFunction")
    assert load_template()["Resources"][function]["Properties"]["Events"][event]["Type"] == "Schedule"
