"""Step Functions executions of the pipeline's state machine, as plain data.

The reconciler, the batch reclaim and the views read executions through this one store, so that
pagination, "does not exist" and the status enum are handled once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pipeline.aws import error_code
from pipeline.jobs import execution_arn
from pipeline.status import ExecutionStatus


@dataclass(frozen=True)
class RunningExecution:
    name: str
    arn: str
    started_at: datetime


@dataclass(frozen=True)
class ExecutionOutcome:
    """What DescribeExecution says of one execution (None status: no such execution)."""

    name: str
    arn: str
    status: ExecutionStatus | None
    error: str | None = None
    cause: str | None = None
    started_at: datetime | None = None
    stopped_at: datetime | None = None

    @property
    def exists(self) -> bool:
        return self.status is not None


class ExecutionsStore:
    def __init__(self, sfn: Any, state_machine_arn: str) -> None:
        self._sfn = sfn
        self.state_machine_arn = state_machine_arn

    def arn_of(self, name: str) -> str:
        return execution_arn(self.state_machine_arn, name)

    def running(self) -> Iterator[RunningExecution]:
        """Every RUNNING execution, all pages (ListExecutions returns at most 1,000 a page)."""
        pages = self._sfn.get_paginator("list_executions").paginate(
            stateMachineArn=self.state_machine_arn,
            statusFilter=ExecutionStatus.RUNNING.value,
            PaginationConfig={"PageSize": 1000},  # the API's maximum: one call for most pipelines
        )
        for page in pages:
            for execution in page["executions"]:
                yield RunningExecution(execution["name"], execution["executionArn"], execution["startDate"])

    def describe(self, name: str) -> ExecutionOutcome:
        """The execution of this name (deterministic ARN); status None when none exists."""
        arn = self.arn_of(name)
        try:
            found = self._sfn.describe_execution(executionArn=arn)
        except Exception as exc:
            if error_code(exc) == "ExecutionDoesNotExist":
                return ExecutionOutcome(name, arn, None)
            raise
        return ExecutionOutcome(
            name=name,
            arn=arn,
            status=ExecutionStatus(found["status"]),
            error=found.get("error"),
            cause=found.get("cause"),
            started_at=found.get("startDate"),
            stopped_at=found.get("stopDate"),
        )

    def stop(self, name: str, error: str, cause: str) -> None:
        self._sfn.stop_execution(executionArn=self.arn_of(name), error=error, cause=cause)
