"""Step Functions task: account for every file and check the failure tolerance (no AWS calls)."""

from __future__ import annotations

from typing import Any

from pipeline.handlers import _wiring
from pipeline.tasks import Tolerance, finalize
from pipeline.telemetry import logger
from pipeline.telemetry.handler import instrumented
from pipeline.telemetry.logging import correlate


@instrumented("finalize")
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    correlate(job_id=event["job_id"], execution_name=event.get("execution_name"))
    result = finalize(event, Tolerance(_wiring.settings().max_failed_file_percent))
    logger.info(
        "run accounted for",
        extra={"phase": event.get("phase"), "within_tolerance": result["within_tolerance"], "counts": result["counts"]},
    )
    return result
