"""The AWS-native metrics the alarms and dashboards read, by the kind of template resource they describe.

Beside the pipeline's metric catalog (`pipeline.telemetry.catalog`), apart from it because no
handler emits these, and every handler imports that catalog at its cold start.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pipeline.telemetry.units import Unit

_C, _S = Unit.COUNT, Unit.SECONDS


class ResourceKind(StrEnum):
    """The kinds of template resource an AWS-native metric describes, with its dimension."""

    QUEUE = "AWS::SQS::Queue"
    FUNCTION = "AWS::Serverless::Function"
    STATE_MACHINE = "AWS::Serverless::StateMachine"
    TABLE = "AWS::DynamoDB::Table"


AWS_DIMENSION: dict[ResourceKind, str] = {
    ResourceKind.QUEUE: "QueueName",
    ResourceKind.FUNCTION: "FunctionName",
    ResourceKind.STATE_MACHINE: "StateMachineArn",
    ResourceKind.TABLE: "TableName",
}
AWS_NAMESPACE: dict[ResourceKind, str] = {
    ResourceKind.QUEUE: "AWS/SQS",
    ResourceKind.FUNCTION: "AWS/Lambda",
    ResourceKind.STATE_MACHINE: "AWS/States",
    ResourceKind.TABLE: "AWS/DynamoDB",
}


@dataclass(frozen=True)
class AwsMetricSpec:
    """A metric AWS publishes about one of the template's resources (the sandbox publishes it too)."""

    kind: ResourceKind
    name: str
    unit: Unit
    description: str
    statistic: str = "Sum"
    period: int = 60

    @property
    def namespace(self) -> str:
        return AWS_NAMESPACE[self.kind]

    @property
    def dimension(self) -> str:
        return AWS_DIMENSION[self.kind]


_Q, _L, _SM, _T = ResourceKind.QUEUE, ResourceKind.FUNCTION, ResourceKind.STATE_MACHINE, ResourceKind.TABLE
AWS_CATALOG: dict[tuple[ResourceKind, str], AwsMetricSpec] = {
    (spec.kind, spec.name): spec
    for spec in (
        AwsMetricSpec(_Q, "ApproximateNumberOfMessagesVisible", _C, "Messages ready to be received.", "Maximum"),
        AwsMetricSpec(_Q, "ApproximateNumberOfMessagesNotVisible", _C, "Messages in flight (received, not deleted).", "Maximum"),
        AwsMetricSpec(_Q, "ApproximateAgeOfOldestMessage", _S, "Age of the oldest message (reset by every re-send).", "Maximum"),
        AwsMetricSpec(_L, "Invocations", _C, "Invocations of the function."),
        AwsMetricSpec(_L, "Errors", _C, "Invocations that raised or timed out."),
        AwsMetricSpec(_L, "Throttles", _C, "Invocations refused for concurrency."),
        AwsMetricSpec(_L, "Duration", Unit.MILLISECONDS, "Milliseconds an invocation ran.", "p99"),
        AwsMetricSpec(_L, "ConcurrentExecutions", _C, "Invocations running at once.", "Maximum"),
        AwsMetricSpec(_SM, "ExecutionsStarted", _C, "Executions started."),
        AwsMetricSpec(_SM, "ExecutionsSucceeded", _C, "Executions that succeeded."),
        AwsMetricSpec(_SM, "ExecutionsFailed", _C, "Executions that failed."),
        AwsMetricSpec(_SM, "ExecutionsTimedOut", _C, "Executions that timed out."),
        AwsMetricSpec(_SM, "ExecutionsAborted", _C, "Executions stopped (by the batch reclaim or by hand)."),
        AwsMetricSpec(_SM, "ExecutionThrottled", _C, "StartExecution and state transitions throttled."),
        AwsMetricSpec(_T, "ReadThrottleEvents", _C, "Reads throttled by DynamoDB."),
        AwsMetricSpec(_T, "WriteThrottleEvents", _C, "Writes throttled by DynamoDB (the semaphore's one item is hot)."),
        AwsMetricSpec(_T, "ConditionalCheckFailedRequests", _C, "Conditional writes refused (lost races, duplicates)."),
    )
}


def aws_metric(kind: ResourceKind, name: str) -> AwsMetricSpec:
    """The catalogued AWS metric; KeyError for one the catalog does not know."""
    return AWS_CATALOG[(kind, name)]
