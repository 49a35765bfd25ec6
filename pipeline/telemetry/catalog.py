"""The metric catalog: the single source of truth for every metric the pipeline is watched by.

Each entry names the metric, its unit, its dimensions, what it means, the statistic and period it
is read with, and the functions that emit it (a test checks the last against the handlers' code).
Handlers emit only through `pipeline.telemetry.metrics.emit(Metric.X, value)`; dashboards,
alarms and docs read this. Dimensions stay low-cardinality: a job id is a log/metadata property,
never a dimension. The AWS-native metrics the alarms and dashboards read (SQS, Lambda, Step
Functions, DynamoDB) are catalogued too, by the kind of resource they describe, so that nothing
downstream names a metric the catalogs do not know: in `pipeline.telemetry.aws_catalog`, apart
from this module since no handler emits them and every handler imports this one (bench/imports.py
times that import). Both share `pipeline.telemetry.units`; only the docs page joins them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pipeline.stack import Function
from pipeline.telemetry.units import Unit

NAMESPACE = "PipeOps"
# Every pipeline metric carries these dimensions (service comes from POWERTOOLS_SERVICE_NAME).
STANDARD_DIMENSIONS: tuple[str, ...] = ("service", "stage", "function")





@dataclass(frozen=True)
class MetricSpec:
    name: Metric
    unit: Unit
    description: str
    emitters: tuple[Function, ...]
    # How dashboards and alarms read it by default: counts are summed per minute; gauges the
    # reconciler samples every run are read as their maximum over its schedule.
    statistic: str = "Sum"
    period: int = 60
    dimensions: tuple[str, ...] = STANDARD_DIMENSIONS


class Metric(StrEnum):
    """Metric names; `CATALOG[Metric.X]` holds the rest of the definition."""

    FILES_INGESTED = "FilesIngested"
    JOBS_QUEUED = "JobsQueued"
    JOBS_STARTED = "JobsStarted"
    CAPACITY_WAITS = "CapacityWaits"
    START_EXECUTION_FAILURES = "StartExecutionFailures"
    ROUTER_FAILURES = "RouterFailures"
    DUPLICATE_DELIVERIES = "DuplicateDeliveries"
    MALFORMED_MESSAGES = "MalformedMessages"
    SLOTS_ACQUIRED = "SlotsAcquired"
    SLOTS_RELEASED = "SlotsReleased"
    DUPLICATE_RELEASES = "DuplicateReleases"
    UNSUPPORTED_FILES = "UnsupportedFiles"
    EMPTY_FILES = "EmptyFiles"
    FILES_DETECTED = "FilesDetected"
    PII_ENTITIES_DETECTED = "PiiEntitiesDetected"
    FILES_REDACTED = "FilesRedacted"
    FILE_FAILURES = "FileFailures"
    SYNTHETIC_VALUES_GENERATED = "SyntheticValuesGenerated"
    JOBS_SUCCEEDED = "JobsSucceeded"
    JOBS_FAILED = "JobsFailed"
    JOB_DURATION = "JobDuration"
    QUEUE_WAIT = "QueueWait"
    BATCH_JOBS_SCHEDULED = "BatchJobsScheduled"
    STALE_JOBS_RECLAIMED = "StaleJobsReclaimed"
    STALE_STATUS_WRITES = "StaleStatusWrites"
    # The reconciler (monitors/reconcile), every run:
    RECONCILE_RUNS = "ReconcileRuns"
    CONCURRENCY_ACTIVE = "ConcurrencyActive"
    WORKFLOWS_RUNNING = "WorkflowsRunning"
    COUNTER_DRIFT = "CounterDrift"
    LEAKED_SLOTS_RELEASED = "LeakedSlotsReleased"
    ORPHAN_EXECUTIONS = "OrphanExecutions"
    STUCK_RUNS_REPAIRED = "StuckRunsRepaired"
    UNANNOUNCED_RUNS_REPAIRED = "UnannouncedRunsRepaired"
    RECONCILE_RACES_LOST = "ReconcileRacesLost"
    IMPLAUSIBLE_DRIFT = "ImplausibleDrift"
    SLOTS_FULL_IDLE = "SlotsFullIdle"
    BACKLOG_STALLED = "BacklogStalled"
    OLDEST_QUEUED_AGE = "OldestQueuedAge"
    RUN_FILE_FAILURE_PERCENT = "RunFileFailurePercent"
    # The "files done on time" objective's indicators (pipeline/deadline.py): each file counted once.
    FILES_ON_TIME = "FilesOnTime"
    FILES_MISSED = "FilesMissed"
    FILES_OVERDUE = "FilesOverdue"
    FILES_LOST = "FilesLost"


def _reconciler_specs() -> tuple[MetricSpec, ...]:
    """What the reconciler emits on every run, zeros included, so no alarm on it starves."""

    def gauge(metric: Metric, description: str, unit: Unit = Unit.COUNT, statistic: str = "Maximum") -> MetricSpec:
        return MetricSpec(metric, unit, description, (Function.RECONCILER,), statistic, RECONCILE_PERIOD)

    def repairs(metric: Metric, description: str) -> MetricSpec:
        return MetricSpec(metric, Unit.COUNT, description, (Function.RECONCILER,), "Sum", RECONCILE_PERIOD)

    return (
        repairs(Metric.RECONCILE_RUNS, "Reconciler runs (heartbeat: one per run; its absence pages)."),
        gauge(Metric.CONCURRENCY_ACTIVE, "active_count as the reconciler read it (slots held)."),
        gauge(Metric.WORKFLOWS_RUNNING, "Executions of the state machine RUNNING when the reconciler listed them."),
        gauge(
            Metric.COUNTER_DRIFT,
            "active_count minus the router-started executions running, less the slots in transit (taken and not "
            "started yet, or ended and not released yet, within the reconciler's grace): positive = slots the "
            "reconciler would repair; negative = a count below what runs.",
        ),
        repairs(
            Metric.LEAKED_SLOTS_RELEASED,
            "Slots the reconciler released: held for an execution that ended, or for none past the grace period.",
        ),
        gauge(
            Metric.ORPHAN_EXECUTIONS,
            "Running executions that hold no slot (started by hand or redriven); reported, never stopped.",
        ),
        repairs(
            Metric.STUCK_RUNS_REPAIRED,
            "Active runs brought to their execution's outcome, or announced again when they never started, by the reconciler.",
        ),
        repairs(
            Metric.UNANNOUNCED_RUNS_REPAIRED,
            "QUEUED runs with no message on its way, announced again (or failed after too many tries, or "
            "deleted when no file's claim names them) by the reconciler.",
        ),
        repairs(
            Metric.RECONCILE_RACES_LOST,
            "Repairs refused because the world changed since the observation; retried next run.",
        ),
        gauge(
            Metric.IMPLAUSIBLE_DRIFT,
            "1 when the reconciler would release too many slots at once and released none: suspect its view "
            "(state machine ARN, permissions) before the pipeline.",
        ),
        gauge(
            Metric.SLOTS_FULL_IDLE,
            "1 when every slot is taken and no router-started execution runs: the stall signature.",
        ),
        gauge(
            Metric.BACKLOG_STALLED,
            "1 when a run has waited QUEUED longer than the stall window and no run moved in that window.",
        ),
        gauge(
            Metric.OLDEST_QUEUED_AGE,
            "Seconds the oldest QUEUED run has waited (0 when none waits): SQS's own message age resets at "
            "every capacity wait and cannot show it.",
            Unit.SECONDS,
        ),
        repairs(
            Metric.FILES_OVERDUE,
            "Files whose run has no terminal outcome FileDeadlineMinutes after it was queued, counted bad once "
            "each (a conditional mark on the run; never in a report-only pass); they count neither on time "
            "nor missed when they end.",
        ),
        gauge(
            Metric.FILES_LOST,
            "Files claimed by ingest past FileDeadlineMinutes that the run their claim names does not hold "
            "(removed, or the run is gone): no outcome can come; back to 0 once each is uploaded again.",
        ),
    )



_C, _S, _P = Unit.COUNT, Unit.SECONDS, Unit.PERCENT
_F = Function
# The reconciler samples its gauges once a run (the template's default schedule: 5 minutes).
RECONCILE_PERIOD = 300
CATALOG: dict[Metric, MetricSpec] = {
    spec.name: spec
    for spec in (
        MetricSpec(Metric.FILES_INGESTED, _C, "S3 objects accepted by ingest and added to a queued run.", (_F.INGEST,)),
        MetricSpec(
            Metric.JOBS_QUEUED,
            _C,
            "Runs written QUEUED and announced on the main queue (ingest: a new run; batch: every run queued).",
            (_F.INGEST, _F.BATCH_TRIGGER),
        ),
        MetricSpec(Metric.JOBS_STARTED, _C, "Executions started by the router (one per run).", (_F.ROUTER,)),
        MetricSpec(
            Metric.CAPACITY_WAITS, _C, "Messages deferred because every slot was busy (waiting, not failing).", (_F.ROUTER,)
        ),
        MetricSpec(
            Metric.START_EXECUTION_FAILURES,
            _C,
            "StartExecution calls that failed with no execution of the name found; the message is retried "
            "(the slot is given back only if no other router carries on under it).",
            (_F.ROUTER,),
        ),
        MetricSpec(
            Metric.ROUTER_FAILURES,
            _C,
            "Main-queue messages the router failed to route, any reason (the `reason` field of its one ERROR "
            "log line says which); retried, then the DLQ.",
            (_F.ROUTER,),
        ),
        MetricSpec(
            Metric.DUPLICATE_DELIVERIES,
            _C,
            "Deliveries for files or runs already accounted for (redelivery, redrive, re-announcement).",
            (_F.INGEST, _F.ROUTER),
        ),
        MetricSpec(
            Metric.MALFORMED_MESSAGES, _C, "Main-queue messages that can never be processed; they go to the DLQ.", (_F.ROUTER,)
        ),
        MetricSpec(Metric.SLOTS_ACQUIRED, _C, "Semaphore slots taken by the router.", (_F.ROUTER,)),
        MetricSpec(
            Metric.SLOTS_RELEASED,
            _C,
            "Semaphore slots given back, by every releaser: the tracker, the router (a refused start), the "
            "batch trigger's reclaim and the reconciler.",
            (_F.ROUTER, _F.BATCH_TRIGGER, _F.TRACKER, _F.RECONCILER),
        ),
        MetricSpec(
            Metric.DUPLICATE_RELEASES,
            _C,
            "Releases that found no holder: a duplicate or late event, nothing changed.",
            (_F.TRACKER,),
        ),
        MetricSpec(
            Metric.UNSUPPORTED_FILES, _C, "Files skipped for their extension, recorded as unsupported.", (_F.ROUTER,)
        ),
        MetricSpec(Metric.EMPTY_FILES, _C, "Empty files, recorded as empty; not failures.", (_F.DETECT,)),
        MetricSpec(Metric.FILES_DETECTED, _C, "Files scanned for PII.", (_F.DETECT,)),
        MetricSpec(Metric.PII_ENTITIES_DETECTED, _C, "PII entities found (all types).", (_F.DETECT,)),
        MetricSpec(
            Metric.FILES_REDACTED,
            _C,
            "Redacted copies written to the output bucket (blackout: by detect, in the same pass).",
            (_F.DETECT, _F.REDACT),
        ),
        MetricSpec(
            Metric.FILE_FAILURES,
            _C,
            "Files that failed detection or redaction, recorded with key and error.",
            (_F.DETECT, _F.FINALIZE),
        ),
        MetricSpec(
            Metric.SYNTHETIC_VALUES_GENERATED,
            _C,
            "Distinct synthetic replacements generated for a job.",
            (_F.GENERATE_SYNTHETIC,),
        ),
        MetricSpec(Metric.JOBS_SUCCEEDED, _C, "Runs that ended COMPLETE.", (_F.TRACKER,)),
        MetricSpec(
            Metric.JOBS_FAILED,
            _C,
            "Runs marked FAILED (execution failed, timed out or aborted; reclaimed; repaired by the reconciler).",
            (_F.TRACKER, _F.BATCH_TRIGGER, _F.RECONCILER),
        ),
        MetricSpec(
            Metric.JOB_DURATION, _S, "Seconds from a run's start to its terminal status.", (_F.TRACKER,), statistic="p90"
        ),
        MetricSpec(
            Metric.QUEUE_WAIT,
            _S,
            "Seconds a run waited between QUEUED and its execution start.",
            (_F.ROUTER,),
            statistic="p90",
        ),
        MetricSpec(
            Metric.BATCH_JOBS_SCHEDULED, _C, "Jobs the batch trigger queued (new, retried or reclaimed).", (_F.BATCH_TRIGGER,)
        ),
        MetricSpec(
            Metric.STALE_JOBS_RECLAIMED,
            _C,
            "Active jobs with no progress past the stale window, reclaimed.",
            (_F.BATCH_TRIGGER,),
        ),
        MetricSpec(
            Metric.STALE_STATUS_WRITES,
            _C,
            "Status writes refused because they would move a job backwards.",
            (_F.TRACKER,),
        ),
        MetricSpec(
            Metric.FILES_ON_TIME,
            _C,
            "Files done on time: their run ended COMPLETE within FileDeadlineMinutes of being queued and "
            "neither their detection nor their redaction failed (unsupported and empty files included): the "
            "objective's good events, counted once per run (0 included), by the workflow's verdict or, for a "
            "failed execution, the tracker.",
            (_F.FINALIZE, _F.TRACKER),
        ),
        MetricSpec(
            Metric.FILES_MISSED,
            _C,
            "Files that ended failed, or past FileDeadlineMinutes, and were not counted overdue before: bad "
            "events, counted once per run (0 included), by the workflow's verdict or, for a failed execution, "
            "the tracker.",
            (_F.FINALIZE, _F.TRACKER),
        ),
        MetricSpec(
            Metric.RUN_FILE_FAILURE_PERCENT,
            _P,
            "Share of a run's files that failed, as each accounting step of the run counts them "
            "(after detection, after redaction).",
            (_F.FINALIZE,),
            statistic="Average",
            period=RECONCILE_PERIOD,
        ),
        *_reconciler_specs(),
    )
}


def spec(metric: Metric) -> MetricSpec:
    return CATALOG[metric]


def render_markdown() -> str:
    """docs/METRICS.md, generated from both catalogs (a test fails when the file drifts)."""
    from pipeline.telemetry.aws_catalog import AWS_CATALOG  # here only: handlers never load it

    lines = [
        "# Metrics",
        "",
        "<!-- Generated by `python -m pipeline.telemetry.catalog`; do not edit by hand. -->",
        "",
        f"Namespace `{NAMESPACE}`. Every metric carries the dimensions "
        + ", ".join(f"`{d}`" for d in STANDARD_DIMENSIONS)
        + "; a job id is a log property, never a dimension. `function` is the deployed name of the "
        "emitting function (its logical id in template.yaml is listed).",
        "",
        "| metric | unit | read as | emitted by | meaning |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| `{spec.name.value}` | {spec.unit.value} | {spec.statistic} / {spec.period} s | "
        f"{', '.join(emitter.value for emitter in spec.emitters)} | {spec.description} |"
        for spec in CATALOG.values()
    ]
    lines += [
        "",
        "## AWS metrics",
        "",
        "What AWS publishes about the template's resources and the alarms and dashboards read (the sandbox "
        "publishes the same).",
        "",
        "| namespace | metric | dimension | unit | read as | meaning |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {spec.namespace} | `{spec.name}` | {spec.dimension} | {spec.unit.value} | {spec.statistic} / {spec.period} s "
        f"| {spec.description} |"
        for spec in AWS_CATALOG.values()
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    from pathlib import Path

    target = Path(__file__).resolve().parents[2] / "docs" / "METRICS.md"
    target.write_text(render_markdown(), encoding="utf-8")
    print(f"wrote {target.name}")
