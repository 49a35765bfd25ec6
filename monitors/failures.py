"""The failure explainer: which state failed, with what error, on which file.

Step Functions keeps the answer in the execution history: a task's input holds the file key it
was working on, and its failure event (TaskFailed, TaskTimedOut, LambdaFunctionTimedOut...) points
back to it through `previousEventId`. So a Lambda that timed out -- which logs nothing itself --
still names its file here. `explain(history)` is pure; `failures(...)` does the paging.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from pipeline.status import ExecutionStatus
from pipeline.stores.executions import ExecutionsStore

MAX_CAUSE_CHARS = 500
# Keys under which a task's input names the object it works on (ours first).
FILE_KEY_FIELDS = ("file_key", "key", "Key", "object_key")
_FAILURE_DETAILS = {
    "TaskFailed": "taskFailedEventDetails",
    "TaskTimedOut": "taskTimedOutEventDetails",
    "TaskStartFailed": "taskStartFailedEventDetails",
    "TaskSubmitFailed": "taskSubmitFailedEventDetails",
    "LambdaFunctionFailed": "lambdaFunctionFailedEventDetails",
    "LambdaFunctionTimedOut": "lambdaFunctionTimedOutEventDetails",
    "LambdaFunctionStartFailed": "lambdaFunctionStartFailedEventDetails",
    "LambdaFunctionScheduleFailed": "lambdaFunctionScheduleFailedEventDetails",
}
_EXECUTION_END_DETAILS = {
    "ExecutionFailed": "executionFailedEventDetails",
    "ExecutionTimedOut": "executionTimedOutEventDetails",
    "ExecutionAborted": "executionAbortedEventDetails",
}
_SUCCESS_TYPES = frozenset({"TaskSucceeded", "LambdaFunctionSucceeded"})


@dataclass(frozen=True)
class Failure:
    execution: str
    execution_status: str
    state: str
    file_key: str | None
    error: str
    cause: str
    attempts: int
    recovered: bool  # a later attempt of the same state on the same file succeeded
    at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _loads(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return None


def file_key_of(payload: Any) -> str | None:
    """The file a task input works on: a known key at the top, or inside a Lambda `Payload`."""
    if not isinstance(payload, Mapping):
        return None
    for field in FILE_KEY_FIELDS:
        if isinstance(payload.get(field), str):
            return str(payload[field])
    inner = payload.get("Payload") or payload.get("payload")
    return file_key_of(_loads(inner)) if inner is not None else None


def _details(event: Mapping[str, Any]) -> Mapping[str, Any]:
    key = _FAILURE_DETAILS.get(event["type"]) or _EXECUTION_END_DETAILS.get(event["type"])
    return event.get(key, {}) if key else {}


def explain(execution: str, execution_status: str, events: Iterable[Mapping[str, Any]]) -> list[Failure]:
    """Every task failure in one history, grouped by (state, file) with its attempts, and the
    execution's own end when it failed, timed out or was aborted."""
    by_id: dict[int, Mapping[str, Any]] = {}
    grouped: dict[tuple[str, str | None], Failure] = {}
    succeeded: set[tuple[str, str | None]] = set()
    end: Mapping[str, Any] | None = None
    for event in events:
        by_id[int(event["id"])] = event
        kind = event["type"]
        if kind in _FAILURE_DETAILS or kind in _SUCCESS_TYPES:
            state, key = _origin(event, by_id)
            if kind in _SUCCESS_TYPES:
                succeeded.add((state, key))
                continue
            details = _details(event)
            previous = grouped.get((state, key))
            grouped[(state, key)] = Failure(
                execution=execution,
                execution_status=execution_status,
                state=state,
                file_key=key,
                error=str(details.get("error") or kind),
                cause=str(details.get("cause") or "")[:MAX_CAUSE_CHARS],
                attempts=(previous.attempts if previous else 0) + 1,
                recovered=False,
                at=str(event.get("timestamp", "")),
            )
        elif kind in _EXECUTION_END_DETAILS:
            end = event
    found = [
        Failure(**{**failure.to_dict(), "recovered": (failure.state, failure.file_key) in succeeded})
        for failure in grouped.values()
    ]
    if end is not None:  # the execution's own end: what its Fail state or timeout said
        details = _details(end)
        found.append(
            Failure(
                execution, execution_status, "(execution)", None, str(details.get("error") or end["type"]),
                str(details.get("cause") or "")[:MAX_CAUSE_CHARS], 1, False, str(end.get("timestamp", "")),
            )
        )
    return found


def _origin(event: Mapping[str, Any], by_id: Mapping[int, Mapping[str, Any]]) -> tuple[str, str | None]:
    """(state name, file key) of the task an event belongs to, following previousEventId back."""
    state, key = "?", None
    current: Mapping[str, Any] | None = event
    for _ in range(64):  # a task's events are a short chain; never loop on a malformed history
        if current is None:
            break
        kind = current["type"]
        if key is None and kind == "TaskScheduled":
            key = file_key_of(_loads(current.get("taskScheduledEventDetails", {}).get("parameters")))
        elif key is None and kind == "LambdaFunctionScheduled":
            key = file_key_of(_loads(current.get("lambdaFunctionScheduledEventDetails", {}).get("input")))
        elif kind.endswith("StateEntered"):
            entered = current.get("stateEnteredEventDetails", {})
            state = str(entered.get("name", "?"))
            key = key or file_key_of(_loads(entered.get("input")))
            break
        previous = current.get("previousEventId")
        current = by_id.get(int(previous)) if previous else None
    return state, key


def failures(sfn: Any, state_machine_arn: str, since: datetime, *, limit: int = 50, include_recovered: bool = False) -> list[Failure]:
    """Failures of executions that started since `since` (newest first, at most `limit` executions
    read): failed, timed-out and aborted ones, and the task failures inside those that succeeded."""
    executions = ExecutionsStore(sfn, state_machine_arn)
    found: list[Failure] = []
    read = 0
    for execution in executions.listed():
        if execution.started_at < since or read >= limit:
            return found
        if execution.status is ExecutionStatus.RUNNING:
            continue
        read += 1
        for failure in explain(execution.name, execution.status.value, executions.history(execution.arn)):
            if include_recovered or not failure.recovered:
                found.append(failure)
    return found
