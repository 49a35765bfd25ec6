"""The health snapshot: one look at queue, DLQs, semaphore, executions and jobs.

`observe` does the I/O; `assess` is pure and names what an on-call engineer should look at
(DESIGN.md §3: a drifted counter, a stall at "max concurrency" with nothing running, a DLQ
that is not empty).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pipeline.jobs import format_timestamp
from pipeline.status import ExecutionStatus, JobStatus
from pipeline.stores.semaphore import Semaphore
from pipeline.stores.tracking import TrackingStore


@dataclass(frozen=True)
class QueueDepth:
    visible: int
    in_flight: int
    delayed: int

    @property
    def total(self) -> int:
        return self.visible + self.in_flight + self.delayed


@dataclass(frozen=True)
class HealthSnapshot:
    taken_at: str
    main_queue: QueueDepth
    dead_letter_depth: int
    tracker_dead_letter_depth: int
    ingest_dead_letter_depth: int
    oldest_message_age_seconds: float | None
    active_count: int
    holders: Mapping[str, str]
    max_concurrency: int
    running_executions: int
    jobs_by_status: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Finding:
    severity: str  # "critical" | "warning"
    code: str
    message: str


def assess(snapshot: HealthSnapshot) -> list[Finding]:
    """What is wrong, from the snapshot alone."""
    findings: list[Finding] = []
    if snapshot.dead_letter_depth:
        findings.append(Finding("critical", "DlqNotEmpty", f"{snapshot.dead_letter_depth} message(s) in the main DLQ"))
    if snapshot.tracker_dead_letter_depth:
        findings.append(
            Finding("critical", "TrackerDlqNotEmpty", f"{snapshot.tracker_dead_letter_depth} status event(s) never tracked: slots may leak")
        )
    if snapshot.ingest_dead_letter_depth:
        findings.append(
            Finding(
                "critical",
                "IngestDlqNotEmpty",
                f"{snapshot.ingest_dead_letter_depth} upload event(s) never ingested: their files are not processed",
            )
        )
    if snapshot.active_count != len(snapshot.holders):
        findings.append(
            Finding("critical", "CounterDrift", f"active_count {snapshot.active_count} but {len(snapshot.holders)} holder(s)")
        )
    if snapshot.active_count != snapshot.running_executions:
        findings.append(
            Finding(
                "warning",
                "SlotsVsExecutions",
                f"active_count {snapshot.active_count} vs {snapshot.running_executions} running execution(s)"
                " (transient while jobs start and end; persistent means drift)",
            )
        )
    if snapshot.active_count >= snapshot.max_concurrency and snapshot.running_executions == 0:
        findings.append(Finding("critical", "StalledAtCapacity", "every slot is held but nothing is running"))
    return findings


def _queue_depth(sqs: Any, url: str) -> QueueDepth:
    if not url:
        return QueueDepth(0, 0, 0)
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return QueueDepth(*(int(attributes.get(name, 0)) for name in names))


def _oldest_message_age(cloudwatch: Any, queue_url: str, now: datetime) -> float | None:
    """The highest ApproximateAgeOfOldestMessage of the last minute (AWS/SQS; the sandbox publishes it too)."""
    response = cloudwatch.get_metric_statistics(
        Namespace="AWS/SQS",
        MetricName="ApproximateAgeOfOldestMessage",
        Dimensions=[{"Name": "QueueName", "Value": queue_url.rsplit("/", 1)[-1]}],
        StartTime=now - timedelta(minutes=10),
        EndTime=now,
        Period=60,
        Statistics=["Maximum"],
    )
    points = sorted(response.get("Datapoints", []), key=lambda p: p["Timestamp"])
    return float(points[-1]["Maximum"]) if points else None


def _running(sfn: Any, state_machine_arn: str) -> int:
    pages = sfn.get_paginator("list_executions").paginate(stateMachineArn=state_machine_arn, statusFilter=ExecutionStatus.RUNNING)
    return sum(len(page["executions"]) for page in pages)


def _max_concurrency(lambda_client: Any, router_function: str) -> int:
    env = lambda_client.get_function_configuration(FunctionName=router_function).get("Environment", {})
    return int(env.get("Variables", {}).get("MAX_CONCURRENT_WORKFLOWS", 10))


def observe(resources: Any, client: Any, now: datetime | None = None) -> HealthSnapshot:
    """Read everything the snapshot holds. `client(service)` returns a boto3 client."""
    now = now or datetime.now(UTC)
    sqs = client("sqs")
    dynamodb = client("dynamodb")
    semaphore = Semaphore(resources.CoordinationTableName, dynamodb).read()
    counts = TrackingStore(resources.TrackingTableName, dynamodb).count_by_status()
    return HealthSnapshot(
        taken_at=format_timestamp(now),
        main_queue=_queue_depth(sqs, resources.MainQueueUrl),
        dead_letter_depth=_queue_depth(sqs, resources.DeadLetterQueueUrl).total,
        tracker_dead_letter_depth=_queue_depth(sqs, resources.TrackerDeadLetterQueueUrl).total,
        ingest_dead_letter_depth=_queue_depth(sqs, resources.IngestDeadLetterQueueUrl).total,
        oldest_message_age_seconds=_oldest_message_age(client("cloudwatch"), resources.MainQueueUrl, now),
        active_count=semaphore.active_count,
        holders=dict(semaphore.holders),
        max_concurrency=_max_concurrency(client("lambda"), resources.RouterFunctionName),
        running_executions=_running(client("stepfunctions"), resources.StateMachineArn),
        jobs_by_status={status.value: counts.get(status, 0) for status in JobStatus if counts.get(status, 0)},
    )
