"""Router: SQS batch of job messages → semaphore slot → StartExecution (partial batch failures)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from pipeline.aws import client
from pipeline.handlers import _wiring
from pipeline.jobs import JobMessage, MalformedMessageError, parse_timestamp, utc_now
from pipeline.routing import RouteOutcome, Router
from pipeline.telemetry import emit, logger
from pipeline.telemetry.catalog import Metric
from pipeline.telemetry.handler import instrumented
from pipeline.telemetry.logging import correlate
from pipeline.telemetry.tracing import carrier_from_current, carrier_from_sqs_record, span

processor = BatchProcessor(event_type=EventType.SQS)

_OUTCOME_METRIC = {
    RouteOutcome.STARTED: Metric.JOBS_STARTED,
    RouteOutcome.WAITING: Metric.CAPACITY_WAITS,
    RouteOutcome.DUPLICATE: Metric.DUPLICATE_DELIVERIES,
}


@_wiring.built_once
def router() -> Router:
    return Router(
        _wiring.tracking_store(), _wiring.semaphore(), client("stepfunctions"), _wiring.job_queue().send, _wiring.settings()
    )


def route_record(record: SQSRecord) -> None:
    correlate(message_id=record.message_id, job_id=None, execution_name=None)
    try:
        message = JobMessage.from_json(record.body)
    except MalformedMessageError:
        emit(Metric.MALFORMED_MESSAGES)
        logger.error("malformed job message; it will reach the DLQ after maxReceiveCount")
        raise
    correlate(job_id=message.job_id, execution_name=message.run.execution_name)
    with span("router.route", carrier_from_sqs_record(record.raw_event), job_id=message.job_id):
        now = utc_now()
        result = router().route(message, now, carrier_from_current())
    if result.outcome in _OUTCOME_METRIC:
        emit(_OUTCOME_METRIC[result.outcome])
    if result.outcome is RouteOutcome.STARTED:
        emit(Metric.SLOTS_ACQUIRED)
        if result.queued_at:
            emit(Metric.QUEUE_WAIT, (now - parse_timestamp(result.queued_at)).total_seconds())
    if result.unsupported:
        emit(Metric.UNSUPPORTED_FILES, result.unsupported)
    logger.info("message routed", extra={"outcome": result.outcome.value, "files": result.files})


@instrumented("router")
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return process_partial_response(event=event, record_handler=route_record, processor=processor, context=context)
