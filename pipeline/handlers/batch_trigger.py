"""Batch trigger (scheduled, batch mode): list, group by folder, decide each job; queue, reclaim or give up."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from pipeline.aws import client
from pipeline.batch import BatchTrigger
from pipeline.handlers import _wiring
from pipeline.jobs import utc_now
from pipeline.stores.executions import ExecutionsStore
from pipeline.telemetry import emit, logger
from pipeline.telemetry.catalog import Metric
from pipeline.telemetry.handler import instrumented


@_wiring.built_once
def batch_trigger() -> BatchTrigger:
    return BatchTrigger(
        _wiring.tracking_store(),
        _wiring.semaphore(),
        client("s3"),
        ExecutionsStore(client("stepfunctions"), _wiring.settings().state_machine_arn),
        _wiring.job_queue().send,
        _wiring.settings(),
        client("dynamodb"),
    )


@instrumented("batch_trigger")
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    report = batch_trigger().run(utc_now())
    emit(Metric.BATCH_JOBS_SCHEDULED, len(report.queued))
    emit(Metric.JOBS_QUEUED, len(report.queued))
    emit(Metric.STALE_JOBS_RECLAIMED, len(report.reclaimed))
    emit(Metric.JOBS_FAILED, len(report.reclaimed))  # a reclaim marks its run FAILED
    emit(Metric.SLOTS_RELEASED, report.slots_released)
    logger.info("batch trigger run", extra=asdict(report))
    return asdict(report)
