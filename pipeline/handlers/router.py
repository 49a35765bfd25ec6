"""Router: SQS batch of job messages → semaphore slot → StartExecution (partial batch failures).

Every record that fails leaves exactly one structured ERROR line (reason, error type and code,
and the correlation keys: message id, job id, execution name; never file contents) and one
`RouterFailures` point, plus the reason's own metric where the catalog has one. The batch
processor turns the failure into a batchItemFailure, so SQS retries it and, in the end, the DLQ
holds it: a failure is never silent and never swallowed.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from pipeline.aws import client, error_code
from pipeline.config import ConfigurationError
from pipeline.handlers import _wiring
from pipeline.jobs import MalformedMessageError, parse_timestamp, utc_now
from pipeline.routing import (
    RouteOutcome,
    Router,
    RouterError,
    StartExecutionError,
    UnsupportedMessageVersionError,
    parse_message,
)
from pipeline.stores.executions import ExecutionsStore
from pipeline.telemetry import emit, logger
from pipeline.telemetry.catalog import Metric
from pipeline.telemetry.handler import instrumented
from pipeline.telemetry.logging import correlate
from pipeline.telemetry.tracing import carrier_from_current, carrier_from_sqs_record, span

_OUTCOME_METRIC = {
    RouteOutcome.STARTED: Metric.JOBS_STARTED,
    RouteOutcome.WAITING: Metric.CAPACITY_WAITS,
    RouteOutcome.DUPLICATE: Metric.DUPLICATE_DELIVERIES,
    RouteOutcome.REPAIRED: Metric.DUPLICATE_DELIVERIES,
}
# A failed record's reason-specific metric, where the catalog has one (RouterFailures counts all).
_REASON_METRIC = {
    "malformed_message": Metric.MALFORMED_MESSAGES,
    "unsupported_version": Metric.MALFORMED_MESSAGES,
    StartExecutionError.reason: Metric.START_EXECUTION_FAILURES,
}
MAX_ERROR_CHARS = 300


def failure_reason(exc: BaseException) -> str:
    """A low-cardinality label for why a record failed (a log field, safe to group by). Pure."""
    if isinstance(exc, UnsupportedMessageVersionError):
        return "unsupported_version"
    if isinstance(exc, MalformedMessageError):
        return "malformed_message"
    if isinstance(exc, RouterError):
        return exc.reason
    if isinstance(exc, ConfigurationError):
        return "configuration"
    if error_code(exc):
        return "aws_error"
    return "internal_error"


def failure_fields(exc: BaseException) -> dict[str, Any]:
    """The log fields of a failed record: reason, error type and code, a short message.

    Router and parser messages name codes, types and positions only; AWS error messages name
    resources and keys at most. Nothing here ever holds a file's contents.
    """
    fields: dict[str, Any] = {
        "reason": failure_reason(exc),
        "error_type": type(exc).__name__,
        "error": str(exc)[:MAX_ERROR_CHARS],
    }
    code = exc.code if isinstance(exc, StartExecutionError) else error_code(exc)
    if code:
        fields["error_code"] = code
    if isinstance(exc, StartExecutionError):
        fields["slot_released"] = exc.released
        if exc.release_error:
            fields["release_error"] = exc.release_error
    return fields


@_wiring.built_once
def router() -> Router:
    settings = _wiring.settings()
    executions = ExecutionsStore(client("stepfunctions"), settings.state_machine_arn)
    return Router(_wiring.tracking_store(), _wiring.semaphore(), executions, _wiring.job_queue().send, settings)


def route_record(record: SQSRecord) -> None:
    correlate(message_id=record.message_id, job_id=None, execution_name=None)
    try:
        _route(record)
    except Exception as exc:
        fields = failure_fields(exc)
        emit(Metric.ROUTER_FAILURES)
        if fields["reason"] in _REASON_METRIC:
            emit(_REASON_METRIC[fields["reason"]])
        if isinstance(exc, StartExecutionError) and exc.released:
            emit(Metric.SLOTS_RELEASED)
        logger.error("job message not routed; SQS retries it, then the DLQ", extra=fields)
        raise


def _route(record: SQSRecord) -> None:
    message = parse_message(record.body)
    correlate(job_id=message.job_id, execution_name=message.run.execution_name)
    with span("router.route", carrier_from_sqs_record(record.raw_event), job_id=message.job_id):
        now = utc_now()
        result = router().route(message, now, carrier_from_current())
    if result.outcome in _OUTCOME_METRIC:
        emit(_OUTCOME_METRIC[result.outcome])
    if result.slot_taken:
        emit(Metric.SLOTS_ACQUIRED)
    if result.outcome is RouteOutcome.STARTED and result.queued_at:
        emit(Metric.QUEUE_WAIT, (now - parse_timestamp(result.queued_at)).total_seconds())
    if result.unsupported:
        emit(Metric.UNSUPPORTED_FILES, result.unsupported)
    logger.info("message routed", extra={"outcome": result.outcome.value, "files": result.files})


@instrumented("router")
def handler(event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    # A processor per invocation: it keeps the batch's records and failures on itself. Where
    # invocations share one module at once (the sandbox runs them on threads of one interpreter),
    # a shared processor let one invocation clear another's failures, which SQS then deleted as
    # processed (a poison message never reached the DLQ), or run another's records.
    processor = BatchProcessor(event_type=EventType.SQS)
    return process_partial_response(event=event, record_handler=route_record, processor=processor, context=context)
