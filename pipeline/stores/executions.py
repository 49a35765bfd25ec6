"""Step Functions executions of the pipeline's state machine, as plain data.

Every Step Functions call of the product goes through this one store: the router starts and
looks up, the stale repair looks up and stops, the reconciler lists and describes, the views and
the failure explainer read histories. Pagination, "does not exist" and the status enum are
handled once. An execution's name is its run's (deterministic), so its ARN is derived.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
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
class ListedExecution:
    """One execution as ListExecutions lists it (any status)."""

    name: str
    arn: str
    status: ExecutionStatus
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

    def start(self, name: str, input: str) -> str:
        """StartExecution of `name`; its ARN. AWS's errors are raised as they come (the router
        tells a refusal from "already exists" and from a lost answer)."""
        return str(self._sfn.start_execution(stateMachineArn=self.state_machine_arn, name=name, input=input)["executionArn"])

    def status(self, arn: str) -> ExecutionStatus | None:
        """DescribeExecution's status for this exact ARN (a recorded one); None when none exists."""
        try:
            return ExecutionStatus(self._sfn.describe_execution(executionArn=arn)["status"])
        except Exception as exc:
            if error_code(exc) == "ExecutionDoesNotExist":
                return None
            raise

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

    def listed(self) -> Iterator[ListedExecution]:
        """Every execution of the state machine, newest first, all pages."""
        for page in self._sfn.get_paginator("list_executions").paginate(stateMachineArn=self.state_machine_arn):
            for execution in page["executions"]:
                yield ListedExecution(
                    execution["name"], execution["executionArn"], ExecutionStatus(execution["status"]), execution["startDate"]
                )

    def history(self, arn: str) -> Iterator[Mapping[str, Any]]:
        """The execution's history events, oldest first, all pages."""
        for page in self._sfn.get_paginator("get_execution_history").paginate(executionArn=arn):
            yield from page["events"]

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

    def stop(self, arn: str, error: str, cause: str) -> None:
        """StopExecution of this exact ARN (a recorded one); AWS's errors are raised as they come."""
        self._sfn.stop_execution(executionArn=arn, error=error, cause=cause)
