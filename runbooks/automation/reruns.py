"""`executions-failed` / `file-failure-rate`: the failures explained, and selected runs re-run.

Diagnose reads the failure explainer (monitors.failures: which state failed with what error on
which file) grouped by error and state, and the recent failed runs with whether each may be re-run
(runbooks.automation.rerun_plan). Apply re-runs only the runs the operator selects (option `runs`,
ids `job_id@started_at`); without a selection it does nothing and says so.

A re-run is announced the way ingest announces a run: the new QUEUED run is written, then its
message is sent to the main queue, so the router admits it under the semaphore like any other.
One transaction writes the new run, makes it the job's latest (conditional on the failed run
still being the latest) and marks the failed run with the re-run's start (conditional on no mark
yet): of two re-runs of one run, racing or repeated, exactly one writes; the other finds the mark.
The files' object claims that named the failed run move to the re-run (the reconciler reads them
to tell a real run from a candidate that lost a claim race). Each re-run is one audit record.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from monitors.failures import failures
from pipeline.jobs import JobMessage, RunRef, format_timestamp
from pipeline.queue import JobQueue
from pipeline.status import JobStatus
from pipeline.stores._dynamodb import batch_get, cancellations, is_condition_failure
from pipeline.stores.audit import AuditStore, AuditStream
from pipeline.stores.claims import claim_key
from pipeline.stores.run_index import RunIndex
from pipeline.stores.tracking import HEAD_SORT_KEY, RunRecord, TrackingStore, queued_run_item, run_key
from runbooks.automation.remedy_request import RemedyRequest
from runbooks.automation.rerun_plan import (
    Candidate,
    candidates,
    group_failures,
    new_start,
    plan_reruns,
    run_id,
)
from runbooks.automation.result import ActionOutcome, ActionResult, PlannedAction, RunbookResult, Verdict
from runbooks.catalog import Runbook

WINDOW = timedelta(hours=24)  # failed runs and failures looked at, back from now
MAX_RUNS = 50  # failed runs read per status
MAX_EXECUTIONS = 50  # executions the explainer reads
TRANSACTION_ITEMS = 100  # DynamoDB's TransactWriteItems limit
MARK = "rerun_started_at"
NO_SELECTION = "select the runs to re-run (option `runs`: ids `job_id@started_at` from `candidates`); nothing was re-run"


def run(request: RemedyRequest) -> RunbookResult:
    runbook = request.runbook
    now = request.clock()
    window = timedelta(hours=float(request.options.get("window_hours", WINDOW.total_seconds() / 3600)))
    found = read_candidates(request, now - window)
    open_runs = [c for c in found if not c.blocked]
    evidence: dict[str, Any] = {
        "window_hours": window.total_seconds() / 3600,
        "failures": group_failures(
            failures(request.client("stepfunctions"), request.resources.StateMachineArn, now - window, limit=MAX_EXECUTIONS)
        ),
        "candidates": [c.to_dict() for c in found],
    }
    selected = request.chosen("runs")
    plan, refused = plan_reruns(found, selected)
    if refused:
        evidence["refused"] = refused
    if not open_runs and not plan:
        return RunbookResult(runbook.value, evidence, [], [], Verdict.ABSENT)
    if not selected:
        evidence["next"] = NO_SELECTION
    if not request.apply or not plan:
        return RunbookResult(runbook.value, evidence, plan, [ActionOutcome(a, ActionResult.SKIPPED) for a in plan], Verdict.REMAINS)
    by_id = {c.id: c for c in found}
    rerun = Rerun(request)
    done = [rerun.apply(action, by_id[action.target]) for action in plan]
    after = read_candidates(request, now - window)
    remaining = [c.id for c in after if not c.blocked]
    verified = {"remaining": remaining, "reruns": {o.action.target: o.detail.get("rerun") for o in done}}
    return RunbookResult(runbook.value, evidence, plan, done, Verdict.REMAINS if remaining else Verdict.CLEARED, verified, applied=True)


def read_candidates(request: RemedyRequest, since: datetime) -> list[Candidate]:
    """The window's failed runs (and, for file-failure-rate, COMPLETE runs with failed files),
    with their jobs' latest runs and their re-run marks."""
    dynamodb = request.client("dynamodb")
    table = request.resources.TrackingTableName
    index = RunIndex(table, dynamodb)
    statuses = [JobStatus.FAILED] + ([JobStatus.COMPLETE] if request.runbook is Runbook.FILE_FAILURE_RATE else [])
    cutoff = format_timestamp(since)
    records = [r for status in statuses for r in index.newest(status, MAX_RUNS) if r.updated_at >= cutoff]
    if not records:
        return []
    latest = {job: record.started_at for job, record in TrackingStore(table, dynamodb).latest_runs([r.job_id for r in records]).items()}
    items = batch_get(dynamodb, table, [run_key(r.job_id, r.started_at) for r in records])
    marks = {f"{i['job_id']['S']}@{i['started_at']['S']}": i[MARK]["S"] for i in items if MARK in i}
    return candidates(records, latest, marks)


class Rerun:
    """The writes of one re-run: the transaction, the claims, the announcement, the audit."""

    def __init__(self, request: RemedyRequest) -> None:
        resources = request.resources
        self._dynamodb = request.client("dynamodb")
        self._tracking = resources.TrackingTableName
        self._claims = resources.CoordinationTableName
        self._queue = JobQueue(request.client("sqs"), resources.MainQueueUrl)
        self._audit = AuditStore(resources.CoordinationTableName, self._dynamodb, AuditStream.RUNBOOK)
        self._actor = request.who()
        self._clock = request.clock

    def apply(self, action: PlannedAction, candidate: Candidate) -> ActionOutcome:
        failed = candidate.record
        now = self._clock()
        new = RunRef(failed.job_id, new_start(now, candidate.latest_started_at or failed.started_at))
        claimed = self._claims_of(failed, candidate.files)
        items = self._transaction(failed, new, candidate.files, now) + [self._claim_move(claim, failed, new, now) for claim in claimed]
        written, rest = items[:TRANSACTION_ITEMS], items[TRANSACTION_ITEMS:]
        try:
            self._dynamodb.transact_write_items(TransactItems=written)
        except Exception as exc:
            if cancellations(exc) is None:
                raise
            return ActionOutcome(action, ActionResult.RACE_LOST, {"reason": "re-run already, or the job has a later run"})
        for item in rest:  # a run of more files than one transaction holds: the last claims, one by one
            try:
                self._dynamodb.update_item(**item["Update"])
            except Exception as exc:
                if not is_condition_failure(exc):  # a newer version of the file claimed it: leave it
                    raise
        self._queue.send(JobMessage(new.job_id, new.started_at, failed.bucket), 0)
        detail = {"rerun": run_id(new), "execution_name": new.execution_name, "files": len(candidate.files)}
        self._audit.record(
            action=action.kind,
            target=action.target,
            reason=action.reason,
            before={"status": failed.status.value, "error": failed.error or "", "latest": run_id(failed.run)},
            after=detail,
            by=self._actor,
            at=now,
        )
        return ActionOutcome(action, ActionResult.APPLIED, detail)

    def _transaction(self, failed: RunRecord, new: RunRef, files: Sequence[str], now: datetime) -> list[dict[str, Any]]:
        mark = {
            "Update": {
                "TableName": self._tracking,
                "Key": run_key(failed.job_id, failed.started_at),
                "UpdateExpression": f"SET {MARK} = :new",
                "ConditionExpression": f"attribute_not_exists({MARK}) AND #status = :status",
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": {":new": {"S": new.started_at}, ":status": {"S": failed.status.value}},
            }
        }
        put = {
            "Put": {
                "TableName": self._tracking,
                "Item": queued_run_item(new, files, failed.bucket, now, {"rerun_of": failed.started_at}),
                "ConditionExpression": "attribute_not_exists(job_id)",
            }
        }
        head = {
            "Update": {
                "TableName": self._tracking,
                "Key": run_key(failed.job_id, HEAD_SORT_KEY),
                "UpdateExpression": "SET latest_started_at = :new",
                "ConditionExpression": "latest_started_at = :failed",
                "ExpressionAttributeValues": {":new": {"S": new.started_at}, ":failed": {"S": failed.started_at}},
            }
        }
        return [mark, put, head]

    def _claims_of(self, failed: RunRecord, files: Sequence[str]) -> list[dict[str, Any]]:
        """The claims of the re-run's files that still name the failed run (realtime mode only
        writes claims)."""
        if not failed.bucket or not files:
            return []
        keys = [{"doc_key": {"S": claim_key(failed.bucket, key)}} for key in sorted(files)]
        return [
            item
            for item in batch_get(self._dynamodb, self._claims, keys)
            if item.get("job_id", {}).get("S") == failed.job_id and item.get("run_started_at", {}).get("S") == failed.started_at
        ]

    def _claim_move(self, claim: dict[str, Any], failed: RunRecord, new: RunRef, now: datetime) -> dict[str, Any]:
        revision = int(claim["revision"]["N"])
        return {
            "Update": {
                "TableName": self._claims,
                "Key": {"doc_key": claim["doc_key"]},
                "UpdateExpression": "SET run_started_at = :new, revision = :next, claimed_at = :now",
                "ConditionExpression": "revision = :revision AND run_started_at = :failed",
                "ExpressionAttributeValues": {
                    ":new": {"S": new.started_at},
                    ":next": {"N": str(revision + 1)},
                    ":now": {"S": format_timestamp(now)},
                    ":revision": {"N": str(revision)},
                    ":failed": {"S": failed.started_at},
                },
            }
        }
