"""The metric catalog: the single source of truth for every metric the pipeline emits.

Each entry names the metric, its unit, its dimensions and what it means. Handlers emit only
through `pipeline.telemetry.metrics.emit(Metric.X, value)`; dashboards, alarms and docs read this.
Dimensions stay low-cardinality: a job id is a log/metadata property, never a dimension.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

NAMESPACE = "PipeOps"
# Every pipeline metric carries these dimensions (service comes from POWERTOOLS_SERVICE_NAME).
STANDARD_DIMENSIONS: tuple[str, ...] = ("service", "stage", "function")


class Unit(StrEnum):
    COUNT = "Count"
    SECONDS = "Seconds"
    MILLISECONDS = "Milliseconds"
    BYTES = "Bytes"
    PERCENT = "Percent"


@dataclass(frozen=True)
class MetricSpec:
    name: str
    unit: Unit
    description: str
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
    RECONCILE_RACES_LOST = "ReconcileRacesLost"
    IMPLAUSIBLE_DRIFT = "ImplausibleDrift"


_C, _S = Unit.COUNT, Unit.SECONDS
CATALOG: dict[Metric, MetricSpec] = {
    spec.name: spec  # type: ignore[misc]
    for spec in (
        MetricSpec(Metric.FILES_INGESTED, _C, "S3 objects accepted by ingest and added to a queued run."),
        MetricSpec(Metric.JOBS_QUEUED, _C, "Runs written QUEUED and announced on the main queue."),
        MetricSpec(Metric.JOBS_STARTED, _C, "Executions started by the router (one per run)."),
        MetricSpec(Metric.CAPACITY_WAITS, _C, "Messages deferred because every slot was busy (waiting, not failing)."),
        MetricSpec(
            Metric.START_EXECUTION_FAILURES,
            _C,
            "StartExecution calls that failed with no execution of the name found; the message is retried "
            "(the slot is given back only if no other router carries on under it).",
        ),
        MetricSpec(
            Metric.ROUTER_FAILURES,
            _C,
            "Main-queue messages the router failed to route, any reason (the `reason` field of its one ERROR "
            "log line says which); retried, then the DLQ.",
        ),
        MetricSpec(Metric.DUPLICATE_DELIVERIES, _C, "Messages for runs already started or finished (redelivery, redrive)."),
        MetricSpec(Metric.MALFORMED_MESSAGES, _C, "Main-queue messages that can never be processed; they go to the DLQ."),
        MetricSpec(Metric.SLOTS_ACQUIRED, _C, "Semaphore slots taken by the router."),
        MetricSpec(Metric.SLOTS_RELEASED, _C, "Semaphore slots given back (tracker, router, batch trigger)."),
        MetricSpec(Metric.DUPLICATE_RELEASES, _C, "Releases that found no holder: a duplicate or late event, nothing changed."),
        MetricSpec(Metric.UNSUPPORTED_FILES, _C, "Files skipped for their extension, recorded as unsupported."),
        MetricSpec(Metric.EMPTY_FILES, _C, "Empty files, recorded as empty; not failures."),
        MetricSpec(Metric.FILES_DETECTED, _C, "Files scanned for PII."),
        MetricSpec(Metric.PII_ENTITIES_DETECTED, _C, "PII entities found (all types)."),
        MetricSpec(Metric.FILES_REDACTED, _C, "Redacted copies written to the output bucket."),
        MetricSpec(Metric.FILE_FAILURES, _C, "Files that failed detection or redaction, recorded with key and error."),
        MetricSpec(Metric.SYNTHETIC_VALUES_GENERATED, _C, "Distinct synthetic replacements generated for a job."),
        MetricSpec(Metric.JOBS_SUCCEEDED, _C, "Runs that ended COMPLETE."),
        MetricSpec(Metric.JOBS_FAILED, _C, "Runs marked FAILED (execution failed, timed out, aborted, or reclaimed)."),
        MetricSpec(Metric.JOB_DURATION, _S, "Seconds from a run's start to its terminal status."),
        MetricSpec(Metric.QUEUE_WAIT, _S, "Seconds a run waited between QUEUED and its execution start."),
        MetricSpec(Metric.BATCH_JOBS_SCHEDULED, _C, "Jobs the batch trigger queued (new, retried or reclaimed)."),
        MetricSpec(Metric.STALE_JOBS_RECLAIMED, _C, "Active jobs with no progress past the stale window, reclaimed."),
        MetricSpec(Metric.STALE_STATUS_WRITES, _C, "Status writes refused because they would move a job backwards."),
        MetricSpec(Metric.RECONCILE_RUNS, _C, "Reconciler runs (heartbeat: one per run; its absence pages)."),
        MetricSpec(Metric.CONCURRENCY_ACTIVE, _C, "active_count as the reconciler read it (slots held)."),
        MetricSpec(Metric.WORKFLOWS_RUNNING, _C, "Executions of the state machine RUNNING when the reconciler listed them."),
        MetricSpec(
            Metric.COUNTER_DRIFT,
            _C,
            "active_count minus the router-started executions running: positive = slots held by nothing.",
        ),
        MetricSpec(
            Metric.LEAKED_SLOTS_RELEASED,
            _C,
            "Slots the reconciler released: held for an execution that ended, or for none past the grace period.",
        ),
        MetricSpec(Metric.ORPHAN_EXECUTIONS, _C, "Running executions that hold no slot (started by hand or redriven); reported, never stopped."),
        MetricSpec(Metric.STUCK_RUNS_REPAIRED, _C, "Active runs brought to their execution's outcome, or announced again, by the reconciler."),
        MetricSpec(Metric.RECONCILE_RACES_LOST, _C, "Repairs refused because the world changed since the observation; retried next run."),
        MetricSpec(
            Metric.IMPLAUSIBLE_DRIFT,
            _C,
            "1 when the reconciler would release too many slots at once and released none: suspect its view "
            "(state machine ARN, permissions) before the pipeline.",
        ),
    )
}


def spec(metric: Metric) -> MetricSpec:
    return CATALOG[metric]


def render_markdown() -> str:
    """docs/METRICS.md, generated from the catalog (a test fails when the file drifts)."""
    lines = [
        "# Metrics",
        "",
        "<!-- Generated by `python -m pipeline.telemetry.catalog`; do not edit by hand. -->",
        "",
        f"Namespace `{NAMESPACE}`. Every metric carries the dimensions "
        + ", ".join(f"`{d}`" for d in STANDARD_DIMENSIONS)
        + "; a job id is a log property, never a dimension.",
        "",
        "| metric | unit | meaning |",
        "|---|---|---|",
    ]
    lines += [f"| `{spec.name.value}` | {spec.unit.value} | {spec.description} |" for spec in CATALOG.values()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    from pathlib import Path

    target = Path(__file__).resolve().parents[2] / "docs" / "METRICS.md"
    target.write_text(render_markdown(), encoding="utf-8")
    print(f"wrote {target.name}")
