"""The alarm catalog as CloudFormation resources: the topic, every alarm, and the composite.

Generated into template.yaml by `pipeops template build` (never edited there by hand). Alarm
names are `<stack>-<suffix>`, so two stacks in one account never share an alarm.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from alarms.catalog import TOPIC, AlarmSpec, critical

COMPOSITE = "PipelineUnhealthyAlarm"
EMAIL_SUBSCRIPTION = "AlarmEmailSubscription"


def alarm_name(suffix: str) -> dict[str, str]:
    return {"Fn::Sub": f"${{AWS::StackName}}-{suffix}"}


def alarm_resource(spec: AlarmSpec) -> dict[str, Any]:
    statistic = {"ExtendedStatistic" if spec.rule().is_percentile else "Statistic": spec.statistic}
    return {
        "Type": "AWS::CloudWatch::Alarm",
        "Properties": {
            "AlarmName": alarm_name(spec.name_suffix),
            "AlarmDescription": spec.description,
            "Namespace": spec.watched.namespace,
            "MetricName": spec.watched.name,
            "Dimensions": [{"Name": name, "Value": value} for name, value in spec.watched.dimensions],
            **statistic,
            "Period": spec.period,
            "EvaluationPeriods": spec.evaluation_periods,
            "DatapointsToAlarm": spec.datapoints_to_alarm,
            "Threshold": spec.threshold,
            "ComparisonOperator": spec.comparison.value,
            "TreatMissingData": spec.treat_missing_data.value,
            "ActionsEnabled": True,
            "AlarmActions": [{"Ref": TOPIC}],
            "OKActions": [{"Ref": TOPIC}],
        },
    }


def composite_resource(specs: Sequence[AlarmSpec]) -> dict[str, Any]:
    """"Pipeline unhealthy": any critical alarm in ALARM (one page for on-call, the rest context)."""
    rule = " OR ".join(f'ALARM("${{{spec.logical_id}}}")' for spec in critical(specs))
    return {
        "Type": "AWS::CloudWatch::CompositeAlarm",
        "Properties": {
            "AlarmName": alarm_name("PipelineUnhealthy"),
            "AlarmDescription": (
                "One of the pipeline's critical alarms is in ALARM (DLQs, drift, stall, backlog, reconciler, "
                "executions). Runbook: pipeline-unhealthy. First: `pipeops alarms list` names the alarm in ALARM "
                "and its runbook."
            ),
            "AlarmRule": {"Fn::Sub": rule},
            "ActionsEnabled": True,
            "AlarmActions": [{"Ref": TOPIC}],
            "OKActions": [{"Ref": TOPIC}],
        },
    }


def resources(specs: Sequence[AlarmSpec]) -> dict[str, Any]:
    """The topic (with the optional e-mail subscription), every alarm, and the composite."""
    out: dict[str, Any] = {
        TOPIC: {
            "Type": "AWS::SNS::Topic",
            "Properties": {
                # Not encrypted with the stack's key: CloudWatch can publish to a KMS-encrypted
                # topic only with a key policy that lets it; the notifications carry alarm names,
                # states and metric values, never file contents or PII. The display name (at most
                # 100 characters) names the stage, not the stack: a stack name may be 128 long.
                "DisplayName": {"Fn::Sub": "pipeops ${Stage} alarms"},
            },
        },
        EMAIL_SUBSCRIPTION: {
            "Type": "AWS::SNS::Subscription",
            "Condition": "HasAlarmEmail",
            "Properties": {"Protocol": "email", "Endpoint": {"Ref": "AlarmEmail"}, "TopicArn": {"Ref": TOPIC}},
        },
    }
    out |= {spec.logical_id: alarm_resource(spec) for spec in specs}
    out[COMPOSITE] = composite_resource(specs)
    return out
