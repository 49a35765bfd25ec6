"""The router: admit a queued run into the workflow, or let its message wait for a slot.

For each message: read the run; if it already started or ended, the message is a duplicate.
Otherwise take a semaphore slot held by the run's deterministic execution name, freeze the run's
file list (QUEUED → IN_PROGRESS), split off unsupported files, StartExecution, record the ARN.
At capacity the message is re-sent with a delay and the original deleted, so waiting never
counts toward the DLQ. Any failure after the slot was taken gives the slot back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from pipeline.aws import error_code
from pipeline.config import Settings
from pipeline.jobs import JobMessage, execution_arn, format_timestamp, split_supported
from pipeline.status import JobStatus
from pipeline.stores.semaphore import AcquireResult, Semaphore
from pipeline.stores.tracking import RunRecord, TrackingStore


class RouteOutcome(StrEnum):
    STARTED = "started"
    WAITING = "waiting"  # every slot busy: re-sent with a delay
    DUPLICATE = "duplicate"  # the run already started or ended
    NOTHING_TO_PROCESS = "nothing_to_process"  # only unsupported files: completed without a workflow


@dataclass(frozen=True)
class RouteResult:
    outcome: RouteOutcome
    execution_name: str
    execution_arn: str | None = None
    files: int = 0
    unsupported: int = 0
    queued_at: str = ""


class UnknownRunError(LookupError):
    """The message names a run the tracking table does not hold: retried, then the DLQ."""


class StartExecutionError(RuntimeError):
    """StartExecution failed for a reason other than the execution already existing."""


def execution_input(record: RunRecord, files: list[str], unsupported: list[str], settings: Settings, trace: Mapping[str, str]) -> dict[str, Any]:
    """The workflow's input: everything its tasks need, so no task re-reads the run."""
    return {
        "job_id": record.job_id,
        "started_at": record.started_at,
        "execution_name": record.run.execution_name,
        "bucket": record.bucket or settings.input_bucket,
        "output_bucket": settings.output_bucket,
        "files": files,
        "unsupported": unsupported,
        "redaction_mode": settings.redaction_mode.value,
        "trace": dict(trace),
    }


class Router:
    def __init__(
        self,
        store: TrackingStore,
        semaphore: Semaphore,
        sfn: Any,
        defer: Callable[[JobMessage, int], None],
        settings: Settings,
    ) -> None:
        self._store = store
        self._semaphore = semaphore
        self._sfn = sfn
        self._defer = defer
        self._settings = settings

    def route(self, message: JobMessage, now: datetime, trace: Mapping[str, str]) -> RouteResult:
        run = message.run
        name = run.execution_name
        record = self._store.get_run(run)
        if record is None:
            raise UnknownRunError("the message names a run that is not in the tracking table")
        if record.status.is_terminal or record.execution_arn:
            return RouteResult(RouteOutcome.DUPLICATE, name, record.execution_arn)

        state_machine = self._settings.require("state_machine_arn")  # before a slot is taken
        acquired = self._semaphore.acquire(name, format_timestamp(now), self._settings.max_concurrent_workflows)
        if acquired is AcquireResult.AT_CAPACITY:
            self._defer(message, self._settings.capacity_retry_seconds)
            return RouteResult(RouteOutcome.WAITING, name)
        try:
            prepared = self._prepare(record, now)
        except BaseException:
            self._semaphore.release(name)
            raise
        if isinstance(prepared, RouteResult):
            return prepared
        return self._start(prepared, state_machine, trace)

    def _prepare(self, record: RunRecord, now: datetime) -> RunRecord | RouteResult:
        """Freeze the run's files; a RouteResult when there is nothing to start."""
        name = record.run.execution_name
        if record.status is JobStatus.QUEUED:
            frozen = self._store.transition(record.run, JobStatus.IN_PROGRESS, now, expected_status=JobStatus.QUEUED)
            self._store.clear_pending(record.run)
            if frozen is None:  # someone moved it first: look again
                frozen = self._store.get_run(record.run)
                if frozen is None or frozen.status.is_terminal or frozen.execution_arn:
                    self._semaphore.release(name)
                    return RouteResult(RouteOutcome.DUPLICATE, name, frozen.execution_arn if frozen else None)
            record = frozen
        files, unsupported = split_supported(record.files)
        if not files:
            self._store.transition(
                record.run,
                JobStatus.COMPLETE,
                now,
                fields={"failed_files": {"detect": [], "redact": [], "unsupported": unsupported, "empty": []}},
            )
            self._semaphore.release(name)
            return RouteResult(RouteOutcome.NOTHING_TO_PROCESS, name, unsupported=len(unsupported), queued_at=record.queued_at)
        return record

    def _start(self, record: RunRecord, state_machine: str, trace: Mapping[str, str]) -> RouteResult:
        """StartExecution; the slot is given back only if no execution can be running."""
        name = record.run.execution_name
        files, unsupported = split_supported(record.files)
        payload = json.dumps(execution_input(record, files, unsupported, self._settings, trace), ensure_ascii=False)
        try:
            arn = self._sfn.start_execution(stateMachineArn=state_machine, name=name, input=payload)["executionArn"]
        except Exception as exc:
            if error_code(exc) != "ExecutionAlreadyExists":
                self._semaphore.release(name)
                raise StartExecutionError(f"StartExecution failed: {error_code(exc) or type(exc).__name__}") from exc
            arn = execution_arn(state_machine, name)
            status = self._sfn.describe_execution(executionArn=arn)["status"]
            if status != "RUNNING":
                # It ran and ended: the tracker released its slot long ago; give back the one just taken.
                self._semaphore.release(name)
        self._store.record_execution(record.run, arn, unsupported)
        return RouteResult(RouteOutcome.STARTED, name, arn, len(files), len(unsupported), record.queued_at)
