"""Step Functions task: the run's bookkeeping, one function for three actions.

- `status`: move the run's tracking record to `target` (forward only; our timestamp format);
- `record_failure`: store the failure of one file that a per-file Catch hands over;
- `check` (the default): account for every file from what its tasks handed back; after
  detection write the account on the run's record, at the end write it together with the run's
  verdict (COMPLETE, or FAILED over the tolerance); hand the workflow a small check (within
  tolerance, failed share, counts).

A condition that finds the record moved on raises JobNoLongerActive (the workflow stops there);
a transient AWS failure raises PipelineTransientError (the workflow retries the task).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pipeline.config import ConfigurationError
from pipeline.deadline import Verdict, ended_count
from pipeline.handlers import _wiring
from pipeline.jobs import utc_now
from pipeline.tasks import Tolerance, finalize, record_failure, transient_aws_errors, write_status
from pipeline.telemetry import emit, logger
from pipeline.telemetry.catalog import Metric
from pipeline.telemetry.handler import instrumented
from pipeline.telemetry.logging import correlate

ACTIONS = ("status", "record_failure", "check")


def _same_table(named: str | None, configured: str) -> None:
    """The state machine names the table it means; a function configured for another is a
    broken deployment, refused before anything is written."""
    if named and named != configured:
        raise ConfigurationError("the workflow names another tracking table than this function's TRACKING_TABLE")


@instrumented("finalize")
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    action = event.get("action", "check")
    correlate(job_id=event["job_id"], execution_name=event.get("execution_name"), file_key=event.get("file_key"))
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}; expected one of {', '.join(ACTIONS)}")
    with transient_aws_errors():
        if action == "status":
            _same_table(event.get("table"), _wiring.settings().require("tracking_table"))
            result = write_status(event, _wiring.tracking_store(), utc_now())
            logger.info("run status written", extra={"status": result["status"]})
            return result
        if action == "record_failure":
            result = record_failure(event, _wiring.artifacts())
            emit(Metric.FILE_FAILURES)
            logger.info("file failure recorded", extra={"phase": event["phase"], "error": (event.get("error") or {}).get("Error")})
            return result
        settings = _wiring.settings()
        result, ended = finalize(
            event, _wiring.artifacts(), Tolerance(settings.max_failed_file_percent), _wiring.tracking_store(), utc_now()
        )
    emit(Metric.RUN_FILE_FAILURE_PERCENT, round(100 * float(result.get("failed_share", 0.0)), 2))
    # The verdict's write counted the run's files on time or late (unless counted overdue before).
    counted = ended_count(ended, timedelta(minutes=settings.file_deadline_minutes)) if ended is not None else None
    if counted is not None:
        emit(Metric.FILES_ON_TIME if counted.verdict is Verdict.ON_TIME else Metric.FILES_LATE, counted.files)
    logger.info(
        "run accounted for",
        extra={"phase": event.get("phase"), "within_tolerance": result["within_tolerance"], "counts": result["counts"]},
    )
    return result
