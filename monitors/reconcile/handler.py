"""The scheduled reconciler Lambda: one reconcile pass, its metrics and one log line.

Invoked by its schedule (applies the plan unless the stack says RECONCILE_APPLY=false: report
only, for a team that wants to watch it first) or on demand with `{"dry_run": true|false}`.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from monitors.reconcile.build import ReconcileTarget, build_reconciler
from monitors.reconcile.indicators import Indicators, measure
from monitors.reconcile.loop import ActionResult, Reconciler, ReconcileReport, reconcile
from monitors.reconcile.model import ActionKind, FindingKind
from monitors.reconcile.signals import signals
from pipeline.aws import client
from pipeline.config import load_reconcile_settings
from pipeline.handlers import _wiring
from pipeline.telemetry import emit, logger
from pipeline.telemetry.catalog import Metric
from pipeline.telemetry.handler import instrumented


@_wiring.built_once
def _reconciler_parts() -> dict[str, Any]:
    settings = _wiring.settings()
    reconcile_settings = load_reconcile_settings()
    target = ReconcileTarget(
        coordination_table=settings.require("coordination_table"),
        tracking_table=settings.require("tracking_table"),
        state_machine_arn=settings.require("state_machine_arn"),
        main_queue_url=settings.require("main_queue_url"),
    )
    return {
        "settings": reconcile_settings,
        "reconciler": build_reconciler(client, target, reconcile_settings, actor="reconciler"),
    }


def _reconciler(actor: str) -> Reconciler:
    """Built once per container; the actor (the invoked ARN, for the audit) is per invocation."""
    built: Reconciler = _reconciler_parts()["reconciler"]
    return replace(built, actor=actor)


_RUN_REPAIRS = (ActionKind.MARK_RUN_FAILED, ActionKind.REANNOUNCE_RUN)


def emit_report(report: ReconcileReport, indicators: Indicators, *, counted: bool) -> None:
    """Every run emits the same set, zeros included: an alarm on any of them never starves. The
    one exception: FilesOverdue only from a pass that counted (marked) them; a report-only pass
    marks nothing, and a 0 from it would read as "nothing overdue"."""
    found = [finding.kind for finding in report.plan.findings]
    seen = signals(report.observed)
    emit(Metric.RECONCILE_RUNS)
    emit(Metric.CONCURRENCY_ACTIVE, report.observed.active_count)
    emit(Metric.WORKFLOWS_RUNNING, len(report.observed.running))
    emit(Metric.COUNTER_DRIFT, report.observed.drift)
    released = report.count(ActionResult.APPLIED, ActionKind.RELEASE_HOLDER)
    emit(Metric.LEAKED_SLOTS_RELEASED, released)
    emit(Metric.SLOTS_RELEASED, released)
    emit(Metric.JOBS_FAILED, report.count(ActionResult.APPLIED, ActionKind.MARK_RUN_FAILED))
    emit(Metric.ORPHAN_EXECUTIONS, found.count(FindingKind.ORPHAN_EXECUTION))
    unannounced = report.applied_for(FindingKind.UNANNOUNCED_RUN)
    run_repairs = report.count(ActionResult.APPLIED, ActionKind.MARK_RUN_FAILED, ActionKind.REANNOUNCE_RUN)
    emit(Metric.STUCK_RUNS_REPAIRED, run_repairs - report.applied_for(FindingKind.UNANNOUNCED_RUN, *_RUN_REPAIRS))
    emit(Metric.UNANNOUNCED_RUNS_REPAIRED, unannounced)
    emit(Metric.RECONCILE_RACES_LOST, report.count(ActionResult.RACE_LOST))
    emit(Metric.IMPLAUSIBLE_DRIFT, 1 if FindingKind.IMPLAUSIBLE_DRIFT in found else 0)
    emit(Metric.SLOTS_FULL_IDLE, 1 if seen.slots_full_idle else 0)
    emit(Metric.BACKLOG_STALLED, 1 if seen.backlog_stalled else 0)
    emit(Metric.OLDEST_QUEUED_AGE, seen.oldest_queued_age)
    if indicators.lost_files is not None:
        emit(Metric.FILES_LOST, indicators.lost_files)
    if counted:
        emit(Metric.FILES_OVERDUE, indicators.overdue_files)


@instrumented("reconciler")
def handler(event: dict[str, Any] | None, context: Any) -> dict[str, Any]:
    dry_run = bool((event or {}).get("dry_run", not _reconciler_parts()["settings"].apply))
    actor = str(getattr(context, "invoked_function_arn", "") or "reconciler")
    reconciler = _reconciler(actor)
    report = reconcile(reconciler, apply=not dry_run)
    deadline = timedelta(minutes=reconciler.settings.file_deadline_minutes)
    # Counted (overdue marks, claims settled) only where the count is emitted: this function's
    # applying passes; `pipeops reconcile --apply` repairs but counts nothing.
    indicators = measure(
        report.observed.active_runs, reconciler.tracking, reconciler.claims, reconciler.clock(), deadline, count=not dry_run
    )
    emit_report(report, indicators, counted=not dry_run)
    if indicators.errors:
        logger.error("on-time indicators incomplete", extra={"errors": list(indicators.errors)})
    result = report.to_dict() | {"indicators": indicators.to_dict()}
    log = logger.warning if result["findings"] else logger.info
    log(
        "reconcile run",
        extra={
            "dry_run": dry_run,
            "findings": result["findings"],
            "actions": result["actions"],
            "drift_before": result["drift_before"],
            "drift_after": result["drift_after"],
        },
    )
    return result
