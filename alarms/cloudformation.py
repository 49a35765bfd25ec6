"""The alarm catalog as CloudFormation resources: the topics, every alarm, and the composite.

Generated into template.yaml by `pipeops template build` (never edited there by hand). Alarm
names are `<stack>-<suffix>`, so two stacks in one account never share an alarm.

Who hears what (one page per incident, and a new stack is quiet):

- `AlarmTopic` is the page (subscribe the pager; `AlarmEmail` subscribes to it). It gets only the
  composite `PipelineUnhealthy` going to ALARM: an incident fires several alarms (a poison message
  fails the router, its Lambda invocations and fills the DLQ), and pages once.
- `AlarmStateTopic` carries everything else, for a chat channel or a ticket queue: every alarm's
  own ALARM and OK (which alarm of the incident fired, and the warnings: the alarms that are not
  critical, such as a function's duration or a table's throttles), and the composite's return to
  OK. The on-time objective's burn-rate pairs (`alarms.slo_alarms`) notify here too; a page pair is
  also a child of `PipelineUnhealthy`, so that an outage that burns the budget and fires a cause
  alarm pages once. CloudWatch runs an alarm's OKActions when it first leaves INSUFFICIENT_DATA for OK, so a new
  stack sends one OK per alarm here, and nothing to the page.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from alarms.catalog import RUNBOOK_BASE_SUB, TOPIC, AlarmSpec, critical, schedule_period

COMPOSITE = "PipelineUnhealthyAlarm"
EMAIL_SUBSCRIPTION = "AlarmEmailSubscription"
STATE_TOPIC = "AlarmStateTopic"
# Optional customer managed key for both topics (template.yaml's parameter and condition).
TOPIC_KEY_PARAMETER = "AlarmTopicKmsKeyArn"
TOPIC_KEY_CONDITION = "HasAlarmTopicKey"


def alarm_name(suffix: str) -> dict[str, str]:
    return {"Fn::Sub": f"${{AWS::StackName}}-{suffix}"}


def actions(spec: AlarmSpec) -> dict[str, Any]:
    """Every metric alarm tells the state topic; a critical one pages through the composite."""
    return {"AlarmActions": [{"Ref": STATE_TOPIC}], "OKActions": [{"Ref": STATE_TOPIC}]}


def _metric(spec: AlarmSpec) -> dict[str, Any]:
    """The metric part of the alarm: the metric itself, or FILL metric math over it."""
    period = schedule_period() if spec.follows_schedule else spec.period
    dimensions = [{"Name": name, "Value": value} for name, value in spec.watched.dimensions]
    if spec.fill is None:
        statistic = {"ExtendedStatistic" if spec.rule().is_percentile else "Statistic": spec.statistic}
        return {
            "Namespace": spec.watched.namespace,
            "MetricName": spec.watched.name,
            "Dimensions": dimensions,
            **statistic,
            "Period": period,
        }
    metric = {"Namespace": spec.watched.namespace, "MetricName": spec.watched.name, "Dimensions": dimensions}
    return {
        "Metrics": [
            {"Id": "m", "MetricStat": {"Metric": metric, "Period": period, "Stat": spec.statistic}, "ReturnData": False},
            {
                "Id": "filled",
                "Expression": f"FILL(m, {format(spec.fill, 'g')})",
                "Label": f"{spec.watched.name} ({format(spec.fill, 'g')} when not published)",
                "ReturnData": True,
            },
        ]
    }


def alarm_resource(spec: AlarmSpec) -> dict[str, Any]:
    return {
        "Type": "AWS::CloudWatch::Alarm",
        "Properties": {
            "AlarmName": alarm_name(spec.name_suffix),
            "AlarmDescription": {"Fn::Sub": spec.description_at(RUNBOOK_BASE_SUB)},
            **_metric(spec),
            "EvaluationPeriods": spec.evaluation_periods,
            "DatapointsToAlarm": spec.datapoints_to_alarm,
            "Threshold": spec.threshold,
            "ComparisonOperator": spec.comparison.value,
            "TreatMissingData": spec.treat_missing_data.value,
            "ActionsEnabled": True,
            **actions(spec),
        },
    }


# What the composite's children watch, in its description (a sidecar names its own: `covers`).
COVERS = "DLQs, drift, stall, backlog, reconciler, executions, router failures, file failures, files lost, the on-time objective's fast burns"


def composite_resource(specs: Sequence[AlarmSpec], pages: Sequence[str] = (), covers: str = COVERS) -> dict[str, Any]:
    """"Pipeline unhealthy": any critical alarm, or any page pair of the objectives (`pages`, logical
    ids), in ALARM (one page for on-call, the rest context); its return to OK goes to the state
    topic (its first OK, at creation, would page otherwise)."""
    children = [spec.logical_id for spec in critical(specs)] + list(pages)
    rule = " OR ".join(f'ALARM("${{{logical_id}}}")' for logical_id in children)
    return {
        "Type": "AWS::CloudWatch::CompositeAlarm",
        "Properties": {
            "AlarmName": alarm_name("PipelineUnhealthy"),
            "AlarmDescription": {
                "Fn::Sub": f"One of the pipeline's critical alarms is in ALARM ({covers}). First: `pipeops alarms list` names the alarm in ALARM "
                "and its runbook; this notification's TriggeringChildren name it too. Runbooks: "
                f"{RUNBOOK_BASE_SUB}/README.md"
            },
            "AlarmRule": {"Fn::Sub": rule},
            "ActionsEnabled": True,
            "AlarmActions": [{"Ref": TOPIC}],
            "OKActions": [{"Ref": STATE_TOPIC}],
        },
    }


def topic_key() -> dict[str, Any]:
    """The topics' KmsMasterKeyId: the optional customer managed key, else none (never the
    buckets' key, nor `alias/aws/sns`: CloudWatch can publish to an encrypted topic only when the
    key policy lets `cloudwatch.amazonaws.com` use the key, which an AWS managed key never does;
    `pipeops runbook run alert-delivery` checks the given key's policy)."""
    return {"Fn::If": [TOPIC_KEY_CONDITION, {"Ref": TOPIC_KEY_PARAMETER}, {"Ref": "AWS::NoValue"}]}


def resources(specs: Sequence[AlarmSpec], pages: Sequence[str] = (), covers: str = COVERS) -> dict[str, Any]:
    """The topics (the page with the optional e-mail subscription), every alarm, the composite
    (which also pages on the composites `pages` names: the objectives' page pairs)."""
    out: dict[str, Any] = {
        TOPIC: {
            "Type": "AWS::SNS::Topic",
            "Properties": {
                # The notifications carry alarm names, states and metric values, never file
                # contents or PII: encrypted only when AlarmTopicKmsKeyArn is given. The display
                # name (at most 100 characters) names the stage, not the stack: a stack name may
                # be 128 long.
                "DisplayName": {"Fn::Sub": "pipeops ${Stage} alarms"},
                "KmsMasterKeyId": topic_key(),
            },
        },
        STATE_TOPIC: {
            "Type": "AWS::SNS::Topic",
            "Properties": {
                # As the page topic: recoveries, and which child alarm fired.
                "DisplayName": {"Fn::Sub": "pipeops ${Stage} alarm states"},
                "KmsMasterKeyId": topic_key(),
            },
        },
        EMAIL_SUBSCRIPTION: {
            "Type": "AWS::SNS::Subscription",
            "Condition": "HasAlarmEmail",
            "Properties": {"Protocol": "email", "Endpoint": {"Ref": "AlarmEmail"}, "TopicArn": {"Ref": TOPIC}},
        },
    }
    out |= {spec.logical_id: alarm_resource(spec) for spec in specs}
    out[COMPOSITE] = composite_resource(specs, pages, covers)
    return out
