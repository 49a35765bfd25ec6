"""`alert-delivery`: do the stack's alarms reach a person? Diagnose only.

An alarm can show ALARM in the console and page nobody: a topic with no confirmed subscription,
alarm actions someone disabled, a topic key whose policy refuses CloudWatch, a reconciler whose
schedule is off (its alarms then see nothing). Each link is one check here, read from AWS by
`gather_evidence` (read only) and judged by `judge` (pure). Nothing is applied: every fix is a
human step (subscribe and confirm a pager, edit a key policy), which the result's plan names.

`pipeops runbook run alert-delivery` runs it, and `doctor` is the library call a `pipeops doctor`
command prints. Exit 0 when every check holds, 1 when one fails, 2 when AWS could not be read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from pipeline.stack import Function
from runbooks.automation.remedy_request import Clients
from runbooks.automation.result import ActionOutcome, ActionResult, PlannedAction, RunbookResult, Verdict
from runbooks.catalog import Runbook
from stack.resources import StackResources

# Logical ids in template.yaml (tests hold them to the alarm catalog and the template).
PAGE_TOPIC = "AlarmTopic"
SCHEDULE_RULE = f"{Function.RECONCILER.value}Schedule"  # SAM names a Schedule event's rule so
CLOUDWATCH = "cloudwatch.amazonaws.com"
# What CloudWatch calls on the topic's key when it publishes (kms:GenerateDataKey* in a policy).
KEY_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey")
AWS_MANAGED_SNS_KEY = "alias/aws/sns"
PENDING = "PendingConfirmation"


@dataclass(frozen=True)
class AlarmActions:
    """One alarm of the stack as far as delivery goes (names and ARNs only)."""

    name: str
    composite: bool
    actions_enabled: bool
    alarm_actions: tuple[str, ...]


@dataclass(frozen=True)
class Evidence:
    """What `gather_evidence` read; `key_policy` is None when the topic has no key, or when it
    could not be read (`key_error` says why) or is an AWS managed key (`key_manager`)."""

    topic_arn: str
    subscriptions: tuple[str, ...]  # SubscriptionArn of each: an ARN, or PendingConfirmation
    alarms: tuple[AlarmActions, ...]
    rule_name: str
    rule_state: str  # ENABLED, DISABLED, or "" when the rule was not found
    key_id: str = ""  # the topic's KmsMasterKeyId as SNS holds it
    key_manager: str = ""  # CUSTOMER or AWS (DescribeKey)
    key_policy: Mapping[str, Any] | None = None
    key_error: str = ""

    def to_dict(self) -> dict[str, Any]:
        """ARNs and states only (never a subscription's endpoint: an address); the key policy is
        judged, not shown."""
        data = asdict(self) | {
            "subscriptions": list(self.subscriptions),
            "key_policy_read": self.key_policy is not None,
        }
        del data["key_policy"]
        return data


@dataclass(frozen=True)
class Check:
    """One link of the delivery path: whether it holds, what was seen, and the fix when not."""

    id: str
    ok: bool
    detail: str
    fix: str = ""
    names: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "ok": self.ok,
            "detail": self.detail,
            "fix": self.fix,
            "names": list(self.names),
        }


# -- the verdict (pure) -----------------------------------------------------------------------


def check_subscription(evidence: Evidence) -> Check:
    confirmed = [arn for arn in evidence.subscriptions if arn.startswith("arn:")]
    pending = sum(1 for arn in evidence.subscriptions if arn == PENDING)
    detail = f"{len(confirmed)} confirmed, {pending} pending confirmation"
    fix = (
        "subscribe the pager to the page topic and confirm it (`aws sns subscribe --topic-arn "
        f"{evidence.topic_arn} --protocol https --notification-endpoint <pager URL>`, or set AlarmEmail and "
        "click the link sent to it)"
    )
    return Check("confirmed-subscription", bool(confirmed), detail, "" if confirmed else fix)


def check_actions(evidence: Evidence) -> Check:
    muted = tuple(alarm.name for alarm in evidence.alarms if not alarm.actions_enabled)
    if not evidence.alarms:
        return Check(
            "actions-enabled",
            False,
            "no alarm of the stack found",
            "deploy the stack's alarms (template.yaml)",
        )
    if muted:
        fix = f"aws cloudwatch enable-alarm-actions --alarm-names {' '.join(muted)}"
        return Check(
            "actions-enabled",
            False,
            f"{len(muted)} of {len(evidence.alarms)} alarms have actions disabled",
            fix,
            muted,
        )
    return Check("actions-enabled", True, f"all {len(evidence.alarms)} alarms have actions enabled")


def check_composite_pages(evidence: Evidence) -> Check:
    paging = tuple(
        a.name
        for a in evidence.alarms
        if a.composite and a.actions_enabled and evidence.topic_arn in a.alarm_actions
    )
    if paging:
        return Check("composite-pages", True, f"{', '.join(paging)} pages the topic", names=paging)
    fix = (
        "redeploy the stack: its composite alarm's AlarmActions is the page topic (alarms/cloudformation.py)"
    )
    return Check(
        "composite-pages", False, "no composite alarm of the stack sends ALARM to the page topic", fix
    )


def grants(statement: Mapping[str, Any], action: str) -> bool:
    """Whether one policy statement covers `action` for CloudWatch (no Condition narrows it)."""
    principal = statement.get("Principal")
    services = principal.get("Service", []) if isinstance(principal, Mapping) else []
    everyone = principal == "*" or (isinstance(principal, Mapping) and principal.get("AWS") == "*")
    if CLOUDWATCH not in ([services] if isinstance(services, str) else services) and not everyone:
        return False
    if everyone and statement.get("Condition"):
        return False  # a wildcard narrowed by conditions: not provably CloudWatch
    patterns = statement.get("Action", [])
    return any(
        fnmatchcase(action.lower(), p.lower())
        for p in ([patterns] if isinstance(patterns, str) else patterns)
    )


def missing_key_actions(policy: Mapping[str, Any]) -> list[str]:
    """The actions CloudWatch needs on the key that the policy does not allow it (or denies)."""
    statements = policy.get("Statement", [])
    statements = [statements] if isinstance(statements, Mapping) else statements
    allowed = [s for s in statements if s.get("Effect") == "Allow"]
    denied = [s for s in statements if s.get("Effect") == "Deny"]
    return [
        action
        for action in KEY_ACTIONS
        if not any(grants(s, action) for s in allowed) or any(grants(s, action) for s in denied)
    ]


def check_key(evidence: Evidence) -> Check:
    if not evidence.key_id:
        return Check("topic-key", True, "the page topic is not encrypted with a KMS key")
    statement = (
        f'a statement allowing Principal {{"Service": "{CLOUDWATCH}"}} the actions kms:Decrypt and '
        "kms:GenerateDataKey* (docs/DEPLOY.md, section 7)"
    )
    if evidence.key_id == AWS_MANAGED_SNS_KEY or evidence.key_manager == "AWS":
        fix = f"set AlarmTopicKmsKeyArn to a customer managed key whose policy has {statement}, or to empty"
        return Check(
            "topic-key",
            False,
            f"the topic's key {evidence.key_id} is AWS managed: CloudWatch cannot use it",
            fix,
        )
    if evidence.key_policy is None:
        fix = f"allow kms:GetKeyPolicy to whoever runs this, then run it again; the policy needs {statement}"
        return Check(
            "topic-key",
            False,
            f"the key policy of {evidence.key_id} could not be read: {evidence.key_error}",
            fix,
        )
    missing = missing_key_actions(evidence.key_policy)
    if missing:
        fix = f"add to the key policy of {evidence.key_id} (aws kms put-key-policy) {statement}"
        return Check(
            "topic-key", False, f"the key policy does not let {CLOUDWATCH} use {', '.join(missing)}", fix
        )
    return Check("topic-key", True, f"the key policy of {evidence.key_id} lets {CLOUDWATCH} publish")


def check_schedule(evidence: Evidence) -> Check:
    if evidence.rule_state == "ENABLED":
        return Check("reconciler-schedule", True, f"{evidence.rule_name} is ENABLED")
    seen = evidence.rule_state or "not found"
    fix = f"aws events enable-rule --name {evidence.rule_name} (runbooks/reconciler-silent.md)"
    return Check(
        "reconciler-schedule",
        False,
        f"the reconciler's schedule rule {evidence.rule_name or '-'} is {seen}",
        fix,
    )


def judge(evidence: Evidence) -> list[Check]:
    """Every link of the delivery path, in the order a notification travels it."""
    return [
        check(evidence)
        for check in (check_actions, check_composite_pages, check_key, check_subscription, check_schedule)
    ]


def result_of(evidence: Evidence, checks: Sequence[Check]) -> RunbookResult:
    """The runbook's result: one human step planned per failed check, none ever applied."""
    plan = [PlannedAction("human_step", check.id, check.fix) for check in checks if not check.ok]
    verdict = Verdict.REMAINS if plan else Verdict.ABSENT
    evidence_out = {"checks": [check.to_dict() for check in checks], **evidence.to_dict()}
    skipped = [ActionOutcome(action, ActionResult.SKIPPED, {"why": "a human step"}) for action in plan]
    return RunbookResult(Runbook.ALERT_DELIVERY.value, evidence_out, plan, skipped, verdict)


# -- the evidence (read only) -----------------------------------------------------------------


def _stack_resources(cloudformation: Any, stack_name: str) -> dict[str, str]:
    physical: dict[str, str] = {}
    for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack_name):
        for summary in page["StackResourceSummaries"]:
            physical[summary["LogicalResourceId"]] = summary.get("PhysicalResourceId", "")
    return physical


def _subscriptions(sns: Any, topic_arn: str) -> tuple[str, ...]:
    pages = sns.get_paginator("list_subscriptions_by_topic").paginate(TopicArn=topic_arn)
    return tuple(sub["SubscriptionArn"] for page in pages for sub in page.get("Subscriptions", []))


def _alarms(cloudwatch: Any, stack_name: str) -> Iterator[AlarmActions]:
    pages = cloudwatch.get_paginator("describe_alarms").paginate(
        AlarmNamePrefix=f"{stack_name}-", AlarmTypes=["MetricAlarm", "CompositeAlarm"]
    )
    for page in pages:
        for kind, composite in (("MetricAlarms", False), ("CompositeAlarms", True)):
            for alarm in page.get(kind, []):
                enabled = bool(alarm.get("ActionsEnabled", True))
                yield AlarmActions(
                    alarm["AlarmName"], composite, enabled, tuple(alarm.get("AlarmActions", []))
                )


def _key(kms: Any, key_id: str) -> dict[str, Any]:
    """The key's manager and policy, or why they could not be read (a check fails on it)."""
    try:
        metadata = kms.describe_key(KeyId=key_id)["KeyMetadata"]
        if metadata.get("KeyManager") == "AWS":
            return {"key_manager": "AWS"}
        policy = kms.get_key_policy(KeyId=metadata["KeyId"], PolicyName="default")["Policy"]
        return {"key_manager": metadata.get("KeyManager", ""), "key_policy": json.loads(policy)}
    except ClientError as exc:
        return {"key_error": exc.response.get("Error", {}).get("Code", "ClientError")}


def gather_evidence(resources: StackResources, clients: Clients) -> Evidence:
    """Read the delivery path of the stack (read only; raises on an AWS error)."""
    physical = _stack_resources(clients.client("cloudformation"), resources.stack_name)
    topic_arn = physical.get(PAGE_TOPIC, "")
    if not topic_arn:
        raise LookupError(f"stack {resources.stack_name!r} has no {PAGE_TOPIC} resource")
    sns = clients.client("sns")
    key_id = sns.get_topic_attributes(TopicArn=topic_arn)["Attributes"].get("KmsMasterKeyId", "")
    rule_name = physical.get(SCHEDULE_RULE, "")
    rule_state = clients.client("events").describe_rule(Name=rule_name).get("State", "") if rule_name else ""
    return Evidence(
        topic_arn=topic_arn,
        subscriptions=_subscriptions(sns, topic_arn),
        alarms=tuple(_alarms(clients.client("cloudwatch"), resources.stack_name)),
        rule_name=rule_name,
        rule_state=rule_state,
        key_id=key_id,
        **(_key(clients.client("kms"), key_id) if key_id and key_id != AWS_MANAGED_SNS_KEY else {}),
    )


def run_alert_delivery(resources: StackResources, clients: Clients) -> RunbookResult:
    """Diagnose the delivery path; `apply` would change nothing, so there is no apply."""
    try:
        evidence = gather_evidence(resources, clients)
    except (ClientError, BotoCoreError, LookupError) as exc:
        code = (
            exc.response.get("Error", {}).get("Code", "")
            if isinstance(exc, ClientError)
            else type(exc).__name__
        )
        return RunbookResult(
            Runbook.ALERT_DELIVERY.value, {}, [], [], Verdict.ERROR, error=f"{code}: {str(exc)[:300]}"
        )
    return result_of(evidence, judge(evidence))


def doctor(resources: StackResources, clients: Clients) -> RunbookResult:
    """What `pipeops doctor` runs: today the alert-delivery checks."""
    return run_alert_delivery(resources, clients)
