"""The failure explainer reads an execution history: which state failed, why, on which file."""

from __future__ import annotations

import json
from typing import Any

from monitors.failures import explain, file_key_of


def history(*events: dict[str, Any]) -> list[dict[str, Any]]:
    numbered = []
    for index, event in enumerate(events, start=1):
        numbered.append({"id": index, "previousEventId": index - 1, "timestamp": f"t{index}", **event})
    return numbered


def entered(state: str, key: str | None) -> dict[str, Any]:
    payload = {"job_id": "scans/", **({"file_key": key} if key else {})}
    return {"type": "TaskStateEntered", "stateEnteredEventDetails": {"name": state, "input": json.dumps(payload)}}


def scheduled(key: str) -> dict[str, Any]:
    return {"type": "LambdaFunctionScheduled", "lambdaFunctionScheduledEventDetails": {"input": json.dumps({"file_key": key})}}


def lambda_failed(error: str, cause: str = "") -> dict[str, Any]:
    return {"type": "LambdaFunctionFailed", "lambdaFunctionFailedEventDetails": {"error": error, "cause": cause}}


TIMED_OUT = '{"errorMessage": "Task timed out after 120.00 seconds", "errorType": "Sandbox.Timedout"}'


def test_a_timed_out_lambda_is_named_with_the_file_it_was_working_on() -> None:
    events = history(
        entered("DetectFile", "scans/slow.txt"),
        scheduled("scans/slow.txt"),
        {"type": "LambdaFunctionStarted"},
        lambda_failed("Sandbox.Timedout", TIMED_OUT),
        scheduled("scans/slow.txt"),  # the Retry
        {"type": "LambdaFunctionStarted"},
        lambda_failed("Sandbox.Timedout", TIMED_OUT),
        {"type": "TaskStateExited", "stateExitedEventDetails": {"name": "DetectFile"}},
    )
    [failure] = explain("run-1", "SUCCEEDED", events)
    assert (failure.state, failure.file_key, failure.error) == ("DetectFile", "scans/slow.txt", "Sandbox.Timedout")
    assert failure.attempts == 2 and not failure.recovered and "timed out" in failure.cause


def test_a_failure_that_a_retry_recovered_is_marked_recovered() -> None:
    events = history(
        entered("RedactFile", "a.txt"),
        scheduled("a.txt"),
        lambda_failed("Lambda.ServiceException"),
        scheduled("a.txt"),
        {"type": "LambdaFunctionSucceeded", "lambdaFunctionSucceededEventDetails": {"output": "{}"}},
    )
    [failure] = explain("run-2", "SUCCEEDED", events)
    assert failure.recovered and failure.file_key == "a.txt"


def test_the_executions_own_end_is_reported_with_its_error() -> None:
    events = history(
        {"type": "FailStateEntered", "stateEnteredEventDetails": {"name": "ToleranceExceeded", "input": "{}"}},
        {"type": "ExecutionFailed", "executionFailedEventDetails": {"error": "FailureToleranceExceeded", "cause": "too many"}},
    )
    [failure] = explain("run-3", "FAILED", events)
    assert (failure.state, failure.error, failure.file_key) == ("(execution)", "FailureToleranceExceeded", None)


def test_a_dynamodb_task_failure_is_attributed_to_its_state() -> None:
    events = history(
        entered("MarkDetecting", None),
        {"type": "TaskScheduled", "taskScheduledEventDetails": {"parameters": json.dumps({"TableName": "t"})}},
        {"type": "TaskFailed", "taskFailedEventDetails": {"error": "DynamoDB.ConditionalCheckFailedException", "cause": "x"}},
    )
    [failure] = explain("run-4", "FAILED", events)
    assert failure.state == "MarkDetecting" and failure.file_key is None


def test_file_keys_are_found_in_our_inputs_and_inside_a_lambda_payload() -> None:
    assert file_key_of({"file_key": "a/b.txt"}) == "a/b.txt"
    assert file_key_of({"FunctionName": "f", "Payload": {"file_key": "c.txt"}}) == "c.txt"
    assert file_key_of({"FunctionName": "f", "Payload": json.dumps({"key": "d.txt"})}) == "d.txt"
    assert file_key_of(["not", "a", "mapping"]) is None


def test_durations_are_read_as_people_type_them() -> None:
    from datetime import timedelta

    import pytest

    from pipeops.durations import parse_duration

    assert parse_duration("30m") == timedelta(minutes=30) and parse_duration("2d") == timedelta(days=2)
    assert parse_duration("1.5h") == timedelta(minutes=90)
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("yesterday")
