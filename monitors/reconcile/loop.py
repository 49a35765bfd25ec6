"""The reconciler's shell: observe the world, carry a plan out, and write down what was done.

`plan` (monitors.reconcile.plan) decides; this module only reads and writes. Reads are ordered on
purpose: the semaphore first, then the running executions, then DescribeExecution for every slot
and active run whose execution was not listed, so a router that takes a slot and starts meanwhile
is seen as running, never as a leak. Every write is conditional on what was observed (the count
repair on the semaphore as read just before it: see `_recount`); a write that finds the world
changed is a lost race, counted and left to the next run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from monitors.reconcile.model import (
    Action,
    ActionKind,
    ActiveRun,
    FindingKind,
    Holder,
    Observation,
    Plan,
)
from monitors.reconcile.plan import overdue, override_plan, plan
from pipeline.config import ReconcileSettings
from pipeline.jobs import JobMessage, RunRef, format_timestamp, parse_timestamp
from pipeline.repairs import mark_failed, release_holder
from pipeline.status import JobStatus
from pipeline.stores.audit import LastRun
from pipeline.stores.protocols import (
    AuditProtocol,
    ClaimsProtocol,
    ExecutionsProtocol,
    RunIndexProtocol,
    SemaphoreProtocol,
    TrackingProtocol,
)
from pipeline.stores.semaphore import ReleaseResult

MAX_LISTED_FINDINGS = 20
RECOUNT_ROUNDS = 3  # tries of a count repair, each from a fresh read of the semaphore


class ActionResult(StrEnum):
    APPLIED = "applied"
    SKIPPED = "skipped"  # a dry run
    RACE_LOST = "race_lost"  # the world changed since the observation: the next run looks again


@dataclass(frozen=True)
class Applied:
    action: Action
    result: ActionResult


@dataclass(frozen=True)
class Reconciler:
    """Everything the reconciler reads and writes, built once (Lambda) or per command (CLI)."""

    semaphore: SemaphoreProtocol
    executions: ExecutionsProtocol
    tracking: TrackingProtocol
    claims: ClaimsProtocol  # which run each object's claim names
    runs: RunIndexProtocol  # the tracking table's indexes: active runs, the latest end
    send: Callable[[JobMessage, int], object]  # announce a run on the main queue
    audit: AuditProtocol  # the repairs applied, and the last run
    settings: ReconcileSettings
    actor: str  # who applies: the Lambda's ARN or the CLI user's
    clock: Callable[[], datetime]

    def observe(self) -> Observation:
        semaphore_read_at = self.clock()
        state = self.semaphore.read()
        running = tuple(self.executions.running())
        active = tuple(_active(record) for record in self.runs.active_runs())
        listed = {execution.name for execution in running}
        to_describe = {holder for holder in state.holders} | {
            run.execution_name for run in active if run.status is not JobStatus.QUEUED
        }
        described = {name: self.executions.describe(name) for name in sorted(to_describe - listed)}
        return Observation(
            claimed_files=self._claimed_files(active, semaphore_read_at),
            last_run_ended=self._last_run_ended(active, semaphore_read_at),
            taken_at=self.clock(),
            semaphore_read_at=semaphore_read_at,
            active_count=state.active_count,
            version=state.version,
            holders=tuple(Holder(name, acquired) for name, acquired in sorted(state.holders.items())),
            running=running,
            described=described,
            active_runs=active,
            settings=self.settings,
        )

    def _claimed_files(self, active: Sequence[ActiveRun], now: datetime) -> dict[str, int]:
        """How many of each overdue realtime QUEUED run's files are claimed by it: only those runs
        are read (one BatchGetItem per 100 files), so the cost follows the runs in trouble."""
        if self.settings.processing_mode != "realtime":
            return {}
        overdue_runs = [
            run for run in active if run.status is JobStatus.QUEUED and overdue(run, now, self.settings.grace_seconds)
        ]
        counts: dict[str, int] = {}
        for run in overdue_runs:
            claims = self.claims.claimed_runs(run.bucket, run.files) if run.files and run.bucket else {}
            counts[run.target] = sum(1 for claimed in claims.values() if claimed == RunRef(run.job_id, run.started_at))
        return counts

    def _last_run_ended(self, active: Sequence[ActiveRun], now: datetime) -> datetime | None:
        """Looked up only when a run has waited QUEUED past the stall window (two one-item queries)."""
        queued = [run.started_at for run in active if run.status is JobStatus.QUEUED]
        window_start = now - timedelta(seconds=self.settings.stall_seconds)
        if not queued or min(queued) >= format_timestamp(window_start):
            return None
        ended = self.runs.last_ended_after(format_timestamp(window_start))
        return parse_timestamp(ended) if ended else None

    def act(self, actions: Sequence[Action], *, apply: bool) -> list[Applied]:
        done: list[Applied] = []
        for action in actions:
            if not apply:
                done.append(Applied(action, ActionResult.SKIPPED))
                continue
            if action.kind is ActionKind.SET_COUNT:
                recounted = self._recount(action)
                action, applied = recounted or action, recounted is not None
            else:
                applied = self._apply(action)
            result = ActionResult.APPLIED if applied else ActionResult.RACE_LOST
            if result is ActionResult.APPLIED:
                self._audit(action)
            done.append(Applied(action, result))
        return done

    def _recount(self, planned: Action) -> Action | None:
        """The count set to its holders as read just now, conditional on that read's version; the
        action as applied (what it was, what it wrote), or None: the count agrees by now, or every
        round lost to another write.

        Not conditional on the observation's version: a run acts seconds after its semaphore read
        (every listing in between), and each acquire and release bumps the version, so on a busy
        semaphore that write lost every race and the count was never repaired. The count is a fact
        of the one item (active_count = its holders), so a fresh read of it is all the write needs.
        """
        for _ in range(RECOUNT_ROUNDS):
            state = self.semaphore.read()
            if state.active_count == len(state.holders):
                return None
            if self.semaphore.set_count(len(state.holders), state.version):
                return replace(
                    planned,
                    expected={"version": state.version, "active_count": state.active_count},
                    values={"active_count": len(state.holders)},
                )
        return None

    def _apply(self, action: Action) -> bool:
        if action.kind is ActionKind.RELEASE_HOLDER:
            released = release_holder(self.semaphore, action.target, acquired_at=str(action.expected["acquired_at"]))
            return released is ReleaseResult.RELEASED
        run = RunRef(str(action.expected["job_id"]), str(action.expected["started_at"]))
        if action.kind is ActionKind.MARK_RUN_FAILED:
            return mark_failed(
                self.tracking,
                run,
                self.clock(),
                {"error": str(action.values["error"]), "cause": str(action.values["cause"])},
                expected_status=JobStatus(action.expected["status"]),
                expected_updated_at=str(action.expected["updated_at"]),
            ).marked
        if action.kind is ActionKind.REANNOUNCE_RUN:
            recorded = self.tracking.record_reannouncement(
                run,
                self.clock(),
                expected_status=JobStatus(action.expected["status"]),
                expected_deadline=str(action.expected.get("announce_deadline") or ""),
            )
            if recorded:
                self.send(JobMessage(run.job_id, run.started_at, str(action.values.get("bucket") or "")), 0)
            return recorded
        if action.kind is ActionKind.DELETE_UNCLAIMED_RUN:
            return self.tracking.delete_unclaimed_run(run, expected_updated_at=str(action.expected["updated_at"]))
        raise ValueError(f"unknown action {action.kind}")

    def record_last_run(self, report: ReconcileReport) -> None:
        """Overwrite the last-run item: when, by whom, what it found and what it repaired."""
        findings = [{"kind": f.kind.value, "target": f.target} for f in report.plan.findings[:MAX_LISTED_FINDINGS]]
        self.audit.record_last_run(
            LastRun(
                at=format_timestamp(self.clock()),
                by=self.actor,
                findings=findings,
                finding_count=len(report.plan.findings),
                repairs=report.count(ActionResult.APPLIED),
                races_lost=report.count(ActionResult.RACE_LOST),
                remaining_findings=report.remaining_findings,
            )
        )

    def _audit(self, action: Action) -> None:
        """What, why, before, after, when and by whom: one item per applied repair, kept 30 days."""
        self.audit.record(
            action=action.kind.value,
            target=action.target,
            reason=action.reason,
            before=action.expected,
            after=action.values,
            by=self.actor,
            at=self.clock(),
        )


@dataclass(frozen=True)
class ReconcileReport:
    observed: Observation
    plan: Plan
    applied: list[Applied] = field(default_factory=list)
    after: Observation | None = None
    apply: bool = False

    @property
    def remaining_findings(self) -> int:
        """Findings left once the run is over (dry run: the ones found)."""
        return len(plan(self.after).findings) if self.after is not None else len(self.plan.findings)

    def count(self, result: ActionResult, *kinds: ActionKind) -> int:
        return sum(1 for a in self.applied if a.result is result and (not kinds or a.action.kind in kinds))

    def applied_for(self, finding: FindingKind, *kinds: ActionKind) -> int:
        """Applied actions (of `kinds`, or any) that repaired a finding of one kind (by target)."""
        targets = {f.target for f in self.plan.findings if f.kind is finding}
        return sum(
            1
            for a in self.applied
            if a.result is ActionResult.APPLIED and a.action.target in targets and (not kinds or a.action.kind in kinds)
        )

    def to_dict(self) -> dict[str, Any]:
        """The report as plain data: the CLI's `--json` (kind `reconcile`) and the Lambda's result."""
        return {
            "observed": observed_summary(self.observed),
            "findings": [{"kind": f.kind.value, "target": f.target, "reason": f.reason} for f in self.plan.findings],
            "actions": [
                {"kind": a.action.kind.value, "target": a.action.target, "reason": a.action.reason, "result": a.result.value}
                for a in self.applied
            ],
            "drift_before": self.observed.drift,
            "drift_after": self.after.drift if self.after is not None else None,
            "applied": self.apply,
            "remaining_findings": self.remaining_findings,
        }


def observed_summary(observation: Observation) -> dict[str, Any]:
    return {
        "active_count": observation.active_count,
        "holders": {holder.name: holder.acquired_at for holder in observation.holders},
        "running_executions": [execution.name for execution in observation.running],
        "max": observation.settings.max_slots,
        "active_runs": len(observation.active_runs),
    }


def reconcile(reconciler: Reconciler, *, apply: bool, release: Sequence[str] = ()) -> ReconcileReport:
    """One pass: observe, plan, act (or only say what would be done), observe again when applied.

    `release` names holders for the operator's override instead of the plan: only those are
    released (conditionally, audited), whatever the implausible-drift guard would say.
    """
    observed = reconciler.observe()
    decided = override_plan(observed, release) if release else plan(observed)
    applied = reconciler.act(decided.actions, apply=apply)
    after = reconciler.observe() if apply and decided.actions else (observed if apply else None)
    report = ReconcileReport(observed, decided, applied, after, apply)
    if apply:
        reconciler.record_last_run(report)
    return report


def _active(record: Any) -> ActiveRun:
    return ActiveRun(
        job_id=record.job_id,
        started_at=record.started_at,
        status=record.status,
        updated_at=record.updated_at,
        execution_name=record.run.execution_name,
        execution_arn=record.execution_arn,
        bucket=record.bucket or "",
        files=tuple(record.files),
        announce_deadline=record.announce_deadline,
        announcements=record.announcements,
        queued_at=record.queued_at,
        deadline_counted=record.deadline_counted,
    )
