"""What the CLI shows, as plain result objects: status, job lists, one job in detail.

Each function reads through boto3 (AWS or the sandbox alike) and returns data; rendering is
`pipeops.render`'s job, so every command can print rich text or JSON. `status` and `jobs` never
scan the tracking table: they query its indexes for what they show (issue 11).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from monitors.health import Finding, HealthSnapshot, assess, observe
from pipeline.status import FailedFileKind, FileOutcome, JobStatus
from pipeline.stores.audit import AUDIT_RETENTION, AuditStore
from pipeline.stores.executions import ExecutionsStore
from pipeline.stores.run_index import RunIndex
from pipeline.stores.tracking import RunRecord, TrackingStore
from stack.resources import StackResources

Client = Callable[[str], Any]


@dataclass(frozen=True)
class StatusView:
    stack_name: str
    snapshot: HealthSnapshot
    findings: list[Finding]
    # The reconciler: its last applied run, and what a dry run finds now (the same finding kinds).
    reconciler_last_run: dict[str, Any] | None = None
    reconcile_findings: list[dict[str, str]] = field(default_factory=list)
    # The stack's alarms in ALARM now (name, reason, runbook): what pages, next to why.
    alarms_in_alarm: list[dict[str, Any]] = field(default_factory=list)
    # The reconciler's newest repairs (pipeline.stores.audit), newest first.
    recent_repairs: list[dict[str, Any]] = field(default_factory=list)

    def pages(self) -> list[str]:
        """What this view shows that should page someone (`status` exits 1 when any): an alarm in
        ALARM, a critical health finding (every DLQ message is one) and whatever the reconciler's
        dry run finds. A warning (counts that differ while jobs start and end) does not page."""
        return [
            *(f"alarm {alarm['name']} is in ALARM" for alarm in self.alarms_in_alarm),
            *(f"{f.code}: {f.message}" for f in self.findings if f.severity == "critical"),
            *(f"reconcile finding {f['kind']}: {f['target']}" for f in self.reconcile_findings),
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "stack": self.stack_name,
            **self.snapshot.to_dict(),
            "findings": [asdict(f) for f in self.findings],
            "reconciler": {
                "last_run": self.reconciler_last_run,
                "findings": self.reconcile_findings,
                "recent_repairs": self.recent_repairs,
            },
            "alarms_in_alarm": self.alarms_in_alarm,
            "pages": self.pages(),
        }


def status(resources: StackResources, client: Client, now: datetime | None = None) -> StatusView:
    """The health snapshot, its findings, the reconciler's view and the alarms firing (`now`: the
    moment the windows of ended runs end at; default the clock)."""
    from alarms.live import list_alarms
    from pipeops import reconcile

    client = _one_client_per_service(client)
    dry = reconcile.run(resources, client, apply=False)
    # The reconciler's dry run read every active run already (the sparse index): count those.
    active = Counter(run.status for run in dry.observed.active_runs)
    snapshot = observe(resources, client, now, active=active)
    firing = [view for view in list_alarms(client("cloudwatch"), resources.stack_name) if view.state == "ALARM"]
    audit = AuditStore(resources.CoordinationTableName, client("dynamodb"))
    last_run = audit.last_run()
    return StatusView(
        resources.stack_name,
        snapshot,
        assess(snapshot),
        reconciler_last_run=last_run.to_dict() if last_run else None,
        reconcile_findings=dry.to_dict()["findings"],
        alarms_in_alarm=[{"name": v.name, "reason": v.reason, "runbook": v.runbook} for v in firing],
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
