"""BEHAVIOUR seam: an execution's status changes are seen as they happen (`sandbox.status_events`).

What moto lacks: it never emits "Step Functions Execution Status Change" events, and tells no one
when an execution starts (`Execution.start`) or ends (`BaseExecutionWorkerCommunication.terminated`,
which sets SUCCEEDED / FAILED / TIMED_OUT / ABORTED).

What it adds: both calls tell every attached watcher before (`changing`: a change in flight) and
after the change (`notify`, with moto's execution object), so the watchers emit the events AWS
emits without polling every execution.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol

from sandbox.seams.patching import Patch, RoutedSeam

KIND = "BEHAVIOUR"


class Watcher(Protocol):
    def changing(self, execution_arn: str) -> None: ...

    def notify(self, execution_arn: str, execution: Any = None) -> None: ...


def _changing(execution_arn: str, change: Callable[[], Any], execution: Any = None) -> None:
    """Run moto's status change, the watchers told before (a change in flight) and after it."""
    watchers = SEAM.parts()
    for watcher in watchers:
        watcher.changing(execution_arn)
    try:
        change()
    finally:  # the status is set (or setting it failed): either way, have a look
        for watcher in watchers:
            watcher.notify(execution_arn, execution)


def _around_start(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def start(execution: Any) -> None:
        _changing(str(execution.exec_arn), lambda: original(execution), execution)

    return start


def _around_terminated(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def terminated(comm: Any) -> None:
        _changing(str(comm.execution.exec_arn), lambda: original(comm), comm.execution)

    return terminated


def _patches() -> list[Patch]:
    from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication, Execution

    return [
        Patch(Execution, "start", _around_start),
        Patch(BaseExecutionWorkerCommunication, "terminated", _around_terminated),
    ]


SEAM: RoutedSeam[Watcher] = RoutedSeam(_patches)
