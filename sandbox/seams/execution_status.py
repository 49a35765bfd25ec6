"""BEHAVIOUR seam: an execution that exists is RUNNING, as on AWS.

What moto lacks: moto appends a new execution to its machine's list before `Execution.start()`
sets its status, so a ListExecutions in that window raised AttributeError ('NoneType' has no
'value'). On AWS StartExecution is one step: an execution that exists is RUNNING.

What it adds: `Execution.status` reads RUNNING while moto has not set it yet.
"""

from __future__ import annotations

from typing import Any

from sandbox.seams.patching import Patch

KIND = "BEHAVIOUR"


def _running_while_starting(original: property) -> property:
    from moto.stepfunctions.parser.api import ExecutionStatus

    def status(execution: Any) -> Any:
        if execution.exec_status is None:
            return ExecutionStatus.RUNNING.value
        return original.fget(execution)  # type: ignore[misc]  # moto's property, fget set

    return property(status)


def patches() -> list[Patch]:
    from moto.stepfunctions.parser.backend.execution import Execution

    return [Patch(Execution, "status", _running_while_starting)]
