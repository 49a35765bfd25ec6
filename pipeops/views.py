"""What the CLI shows, as plain result objects: status, job lists, one job in detail.

Each function reads through boto3 (AWS or the sandbox alike) and returns data; rendering is
`pipeops.render`'s job, so every command can print rich text or JSON. `status` and `jobs` never
scan the tracking table: they query its indexes for what they show. `status` says what
is wrong once (`status_findings`, pure): the alarms in ALARM, the DLQs and the reconciler's signals
under the names of the alarms that watch them, and the reconciler's dry-run findings.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from monitors.reconcile.loop import observed_summary
from monitors.reconcile.model import Finding, FindingKind, Observation
from monitors.reconcile.signals import Signals
from monitors.snapshot import Snapshot, observe
from pipeline.status import FailedFileKind, FileOutcome, JobStatus
from pipeline.stores.audit import AUDIT_RETENTION, AuditStore
from pipeline.stores.executions import ExecutionsStore
from pipeline.stores.run_index import RunIndex
from pipeline.stores.tracking import RunRecord, TrackingStore
from runbooks.catalog import Runbook
from stack.resources import StackResources

Client = Callable[[str], Any]


@dataclass(frozen=True)
class DlqCondition:
    """A DLQ that holds messages: named as the alarm that watches it, with that alarm's runbook
    (tests/unit/test_status_findings.py holds both against the alarm catalog)."""

    depth_field: str  # the snapshot's number
    alarm: str
    runbook: Runbook
    queue: str  # the queue's logical id in the template
    unit: str  # what one message is


DLQ_CONDITIONS = (
    DlqCondition("dead_letter_depth", "DlqNotEmpty", Runbook.DLQ_MESSAGES, "DeadLetterQueue", "message(s) in the main DLQ"),
    DlqCondition(
        "tracker_dead_letter_depth",
        "TrackerDlqNotEmpty",
        Runbook.TRACKER_DLQ,
        "TrackerDeadLetterQueue",
        "status event(s) never tracked: slots may leak",
    ),
    DlqCondition(
        "ingest_dead_letter_depth",
        "IngestDlqNotEmpty",
        Runbook.INGEST_DLQ,
        "IngestDeadLetterQueue",
        "upload event(s) never ingested: their files are not processed",
    ),
    DlqCondition(
        "quarantine_depth",
        "QuarantineQueueNotEmpty",
        Runbook.DLQ_MESSAGES,
        "QuarantineQueue",
        "dead letter(s) a redrive parked: a person must fix or send each back",
    ),
)
# The reconciler's signals, named as the alarms that watch them.
SLOTS_FULL_IDLE = "SlotsFullIdle"
BACKLOG_STALLED = "BacklogStalled"
# The runbook of each reconciler finding: where its cause and repair are written down.
FINDING_RUNBOOKS: Mapping[FindingKind, Runbook] = {
    FindingKind.LEAKED_SLOT: Runbook.COUNTER_DRIFT,
    FindingKind.SLOT_WITHOUT_EXECUTION: Runbook.COUNTER_DRIFT,
    FindingKind.COUNT_MISMATCH: Runbook.COUNTER_DRIFT,
    FindingKind.ORPHAN_EXECUTION: Runbook.EXECUTIONS_FAILED,
    FindingKind.STUCK_RUN: Runbook.BACKLOG_STALLED,
    FindingKind.UNANNOUNCED_RUN: Runbook.BACKLOG_STALLED,
    FindingKind.IMPLAUSIBLE_DRIFT: Runbook.IMPLAUSIBLE_DRIFT,
    FindingKind.REPAIRS_CAPPED: Runbook.COUNTER_DRIFT,
    FindingKind.OVERRIDE_REFUSED: Runbook.COUNTER_DRIFT,
}


class Source(StrEnum):
    """Who says it is wrong."""

    ALARM = "alarm"  # a CloudWatch alarm of the stack, in ALARM now
    RECONCILE = "reconcile"  # the reconciler's dry run: a finding, or a signal it computes
    QUEUE = "queue"  # a DLQ's depth, before its alarm has evaluated it


@dataclass(frozen=True)
class StatusFinding:
    """One thing that is wrong, under the one name the alarms, the runbooks and the reconciler use."""

    name: str  # an alarm's name without the stack prefix (DlqNotEmpty), or a reconciler finding kind
    target: str  # what it concerns: the alarm, a queue, the semaphore, a holder, a run
    reason: str
    runbook: str
    source: Source


@dataclass(frozen=True)
class FiringAlarm:
    name: str  # as deployed: <stack>-<name>
    reason: str
    runbook: str


def status_findings(
    stack_name: str,
    reconcile_findings: Sequence[Finding],
    seen: Signals,
    snapshot: Snapshot,
    firing: Sequence[FiringAlarm],
) -> list[StatusFinding]:
    """Everything wrong, once: the alarms in ALARM, then what the numbers and the reconciler's
    signals show that no alarm in ALARM says yet (the same names), then the reconciler's findings."""
    alarms = [
        StatusFinding(alarm.name.removeprefix(f"{stack_name}-"), alarm.name, alarm.reason, alarm.runbook, Source.ALARM)
        for alarm in firing
    ]
    said = {finding.name for finding in alarms}
    early = [
        StatusFinding(dlq.alarm, dlq.queue, f"{depth} {dlq.unit}", dlq.runbook.value, Source.QUEUE)
        for dlq in DLQ_CONDITIONS
        if (depth := getattr(snapshot, dlq.depth_field))
    ]
    if seen.slots_full_idle:
        reason = "every slot is held and no router-started execution runs"
        early.append(StatusFinding(SLOTS_FULL_IDLE, "semaphore", reason, Runbook.SLOTS_FULL_IDLE.value, Source.RECONCILE))
    if seen.backlog_stalled:
        reason = f"a run has waited QUEUED {seen.oldest_queued_age:.0f} s and nothing moved"
        early.append(StatusFinding(BACKLOG_STALLED, "runs", reason, Runbook.BACKLOG_STALLED.value, Source.RECONCILE))
    found = [
        StatusFinding(f.kind.value, f.target, f.reason, FINDING_RUNBOOKS[f.kind].value, Source.RECONCILE)
        for f in reconcile_findings
    ]
    return alarms + [finding for finding in early if finding.name not in said] + found


@dataclass(frozen=True)
class StatusView:
    """`pipeops status`: the reconciler's observation (slots, executions, active runs), the queue
    and run numbers, and one list of what is wrong."""

    stack_name: str
    observed: Observation
    snapshot: Snapshot
    findings: list[StatusFinding]
    # The reconciler's last applied run and its newest repairs (pipeline.stores.audit), newest first.
    reconciler_last_run: dict[str, Any] | None = None
    recent_repairs: list[dict[str, Any]] = field(default_factory=list)

    def pages(self) -> list[str]:
        """What should page someone (`status` exits 1 when any): every finding, by name and target."""
        return [f"{finding.name}: {finding.target}" for finding in self.findings]

    def to_dict(self) -> dict[str, Any]:
        observed = observed_summary(self.observed)
        return {
            "stack": self.stack_name,
            **self.snapshot.to_dict(),
            "active_count": observed["active_count"],
            "max_concurrency": observed["max"],
            "holders": observed["holders"],
            "running_executions": len(observed["running_executions"]),
            "counter_drift": self.observed.drift,
            "reconciler": {"last_run": self.reconciler_last_run, "recent_repairs": self.recent_repairs},
            "findings": [{**asdict(finding), "source": finding.source.value} for finding in self.findings],
            "pages": self.pages(),
        }


def status(resources: StackResources, client: Client, now: datetime | None = None) -> StatusView:
    """The reconciler's dry run, the numbers, and the alarms firing (`now`: the moment the windows
    of ended runs end at; default the clock)."""
    from alarms.live import list_alarms
    from monitors.reconcile.signals import signals
    from pipeops import reconcile

    client = _one_client_per_service(client)
    dry = reconcile.run(resources, client, apply=False)
    # The reconciler's dry run read every active run already (the sparse index): count those.
    active = Counter(run.status for run in dry.observed.active_runs)
    snapshot = observe(resources, client, active, now)
    firing = [
        FiringAlarm(view.name, view.reason, view.runbook)
        for view in list_alarms(client("cloudwatch"), resources.stack_name)
        if view.state == "ALARM"
    ]
    audit = AuditStore(resources.CoordinationTableName, client("dynamodb"))
    last_run = audit.last_run()
    return StatusView(
        resources.stack_name,
        dry.observed,
        snapshot,
        status_findings(resources.stack_name, dry.plan.findings, signals(dry.observed), snapshot, firing),
        reconciler_last_run=last_run.to_dict() if last_run else None,
        recent_repairs=_recent_repairs(audit, (now or datetime.now(UTC)) - AUDIT_RETENTION),
    )


def _one_client_per_service(client: Client) -> Client:
    """`client` made once per service for this view: each boto3 client costs ~20 ms to build, and
    the reconciler's dry run, the snapshot and the alarms ask for the same few again."""
    made: dict[str, Any] = {}

    def shared(service: str) -> Any:
        if service not in made:
            made[service] = client(service)
        return made[service]

    return shared


# How many of the reconciler's newest repairs `status` shows (`reconcile --history` lists them all).
RECENT_REPAIRS = 5


def _recent_repairs(audit: AuditStore, since: datetime) -> list[dict[str, Any]]:
    """The newest repairs from the audit index; none on a stack without it (status never scans the
    coordination table: `pipeops reconcile --history` does, saying so)."""
    history = audit.history(since, RECENT_REPAIRS, scan_without_index=False)
    return [record.to_dict() for record in history.records]


def run_summary(record: RunRecord) -> dict[str, Any]:
    failed = record.failed_files
    return {
        "job_id": record.job_id,
        "started_at": record.started_at,
        "status": record.status.value,
        "updated_at": record.updated_at,
        "files": len(record.files),
        "entities": dict(record.redaction_results.get("entities_by_type", {})),
        "failed": {kind.value: failed.get(kind, []) for kind in FailedFileKind},
        "error": record.error,
        "execution_arn": record.execution_arn,
    }


def merge_newest(per_status: Iterable[Sequence[RunRecord]], limit: int) -> list[RunRecord]:
    """The `limit` most recently updated runs of several newest-first lists (ties: listed order)."""
    merged = [record for records in per_status for record in records]
    return sorted(merged, key=lambda r: r.updated_at, reverse=True)[: max(limit, 0)]


def jobs(resources: StackResources, client: Client, status_filter: JobStatus | None, limit: int = 50) -> list[dict[str, Any]]:
    """The newest `limit` runs (of one status, or of all: each status asked for `limit`, merged)."""
    if limit <= 0:
        return []
    runs = RunIndex(resources.TrackingTableName, client("dynamodb"))
    statuses = [status_filter] if status_filter else list(JobStatus)
    per_status = [runs.newest(s, limit) for s in statuses]
    return [run_summary(r) for r in merge_newest(per_status, limit)]


@dataclass(frozen=True)
class JobDetail:
    job_id: str
    runs: list[dict[str, Any]]
    state_path: list[str] = field(default_factory=list)
    file_outcomes: dict[str, str] = field(default_factory=dict)
    log_lines: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def file_outcomes(record: RunRecord) -> dict[str, str]:
    """Each file of a run and what became of it."""
    failed = record.failed_files
    outcomes: dict[str, str] = {}
    for kind in (FailedFileKind.DETECT, FailedFileKind.REDACT):
        for entry in failed.get(kind, []):
            outcomes[entry["key"]] = f"failed in {kind}: {entry.get('error')}"
    for kind in (FailedFileKind.UNSUPPORTED, FailedFileKind.EMPTY):
        for key in failed.get(kind, []):
            outcomes[key] = kind.value
    for key in record.files:
        if key not in outcomes:
            outcomes[key] = FileOutcome.REDACTED.value if record.status is JobStatus.COMPLETE else record.status.value.lower()
    return dict(sorted(outcomes.items()))


def _state_path(executions: ExecutionsStore, execution_arn: str | None) -> list[str]:
    if not execution_arn:
        return []
    path: list[str] = []
    for event in executions.history(execution_arn):
        entered = event.get("stateEnteredEventDetails")
        if entered and (not path or path[-1] != entered["name"]):
            path.append(entered["name"])
    return path


def _log_lines(logs: Any, functions: Iterable[str], job_id: str, limit: int) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for function in functions:
        group = f"/aws/lambda/{function}"
        try:
            pages = logs.get_paginator("filter_log_events").paginate(logGroupName=group, filterPattern=json.dumps(job_id))
            for page in pages:
                for event in page.get("events", []):
                    try:
                        record = json.loads(event["message"])
                    except (json.JSONDecodeError, TypeError):
                        continue
                    if isinstance(record, dict) and record.get("job_id") == job_id:
                        lines.append({"function": function, **record})
        except Exception as exc:
            if "ResourceNotFound" not in type(exc).__name__ and "ResourceNotFound" not in str(exc):
                raise
    lines.sort(key=lambda r: str(r.get("timestamp", "")))
    return lines[-limit:]


def job_detail(resources: StackResources, client: Client, job_id: str, log_limit: int = 50) -> JobDetail:
    store = TrackingStore(resources.TrackingTableName, client("dynamodb"))
    runs = store.runs_of(job_id)
    if not runs:
        raise LookupError(f"no runs recorded for job {job_id!r} (job ids of folder jobs end with '/')")
    latest = runs[0]
    return JobDetail(
        job_id=job_id,
        runs=[run_summary(r) for r in runs],
        state_path=_state_path(ExecutionsStore(client("stepfunctions"), resources.StateMachineArn), latest.execution_arn),
        file_outcomes=file_outcomes(latest),
        log_lines=_log_lines(client("logs"), resources.function_names, job_id, log_limit),
    )
