"""The router's pure decisions: the next step for an observed run, what a StartExecution error
says about whether it started, how a message body is read, and how a failure is labelled."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from pipeline.config import ConfigurationError
from pipeline.handlers.router import failure_reason
from pipeline.jobs import MalformedMessageError
from pipeline.routing import (
    InconsistentRunError,
    Seen,
    StartExecutionError,
    StartFailure,
    Step,
    UnknownRunError,
    UnsupportedMessageVersionError,
    classify_start_failure,
    must_wait,
    next_step,
    parse_message,
)
from pipeline.status import JobStatus
from pipeline.stores.semaphore import SemaphoreState
from pipeline.stores.tracking import RunRecord

T0 = "2026-11-29T20:00:00.000000Z"
ARN = "arn:aws:states:us-east-1:123456789012:execution:pipeops-pipeline:claims-x"


def run(status: JobStatus, files: tuple[str, ...] = ("claims/a.txt",), arn: str | None = None) -> RunRecord:
    return RunRecord("claims/", T0, status, T0, files=files, execution_arn=arn)


def client_error(code: str, status: int | None) -> ClientError:
    response: dict = {"Error": {"Code": code, "Message": "m"}}
    if status is not None:
        response["ResponseMetadata"] = {"HTTPStatusCode": status}
    return ClientError(response, "StartExecution")


@pytest.mark.parametrize(
    ("record", "seen", "step"),
    [
        (None, Seen.NOT_LOOKED, Step.UNKNOWN_RUN),
        (run(JobStatus.QUEUED), Seen.NOT_LOOKED, Step.ADMIT),
        (run(JobStatus.QUEUED, ("scans/a.pdf",)), Seen.NOT_LOOKED, Step.COMPLETE_WITHOUT_WORKFLOW),
        (run(JobStatus.IN_PROGRESS, arn=ARN), Seen.NOT_LOOKED, Step.DONE),
        (run(JobStatus.COMPLETE, arn=ARN), Seen.NOT_LOOKED, Step.DONE),
        # No ARN after QUEUED: an execution may exist whose ARN write was lost. Look first.
        (run(JobStatus.IN_PROGRESS), Seen.NOT_LOOKED, Step.FIND_EXECUTION),
        (run(JobStatus.COMPLETE), Seen.NOT_LOOKED, Step.FIND_EXECUTION),
        (run(JobStatus.IN_PROGRESS), Seen.EXISTS, Step.RECORD_ARN),
        (run(JobStatus.COMPLETE), Seen.EXISTS, Step.RECORD_ARN),
        (run(JobStatus.DETECTING), Seen.EXISTS, Step.RECORD_ARN),
        # None exists: carry on (or admit again) only from IN_PROGRESS.
        (run(JobStatus.IN_PROGRESS), Seen.NONE, Step.RESUME),
        (run(JobStatus.IN_PROGRESS, ("scans/a.pdf",)), Seen.NONE, Step.COMPLETE_WITHOUT_WORKFLOW),
        (run(JobStatus.COMPLETE), Seen.NONE, Step.DONE),
        (run(JobStatus.FAILED), Seen.NONE, Step.DONE),
        (run(JobStatus.DETECTING), Seen.NONE, Step.INCONSISTENT),
    ],
)
def test_next_step(record: RunRecord | None, seen: Seen, step: Step) -> None:
    assert next_step(record, seen) is step


@pytest.mark.parametrize(
    ("error", "failure"),
    [
        (client_error("ExecutionAlreadyExists", 400), StartFailure.ALREADY_EXISTS),
        (client_error("ThrottlingException", 400), StartFailure.REFUSED),
        (client_error("ExecutionLimitExceeded", 400), StartFailure.REFUSED),
        (client_error("StateMachineDoesNotExist", 400), StartFailure.REFUSED),
        (client_error("InternalServerError", 500), StartFailure.UNKNOWN),
        (client_error("ServiceUnavailable", None), StartFailure.UNKNOWN),
        (ReadTimeoutError(endpoint_url="https://states"), StartFailure.UNKNOWN),
        (EndpointConnectionError(endpoint_url="https://states"), StartFailure.UNKNOWN),
        (RuntimeError("anything else"), StartFailure.UNKNOWN),
    ],
)
def test_only_an_answer_from_the_service_counts_as_a_refusal(error: BaseException, failure: StartFailure) -> None:
    assert classify_start_failure(error) is failure


def body(**fields: object) -> str:
    return json.dumps({"job_id": "claims/", "started_at": T0, "bucket": "in", **fields})


def test_parse_message_reads_the_current_version() -> None:
    assert parse_message(body(v=1)).job_id == "claims/"
    assert parse_message(body()).version == 1  # no "v": the first version


@pytest.mark.parametrize("text", ["{not json", "[]", body(v="two"), body(v=None), body(v=[1]), body(job_id=7)])
def test_parse_message_refuses_what_is_not_a_job_message(text: str) -> None:
    with pytest.raises(MalformedMessageError):
        parse_message(text)


def test_parse_message_refuses_a_version_it_does_not_know() -> None:
    with pytest.raises(UnsupportedMessageVersionError):
        parse_message(body(v=2))


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (MalformedMessageError("x"), "malformed_message"),
        (UnsupportedMessageVersionError("x"), "unsupported_version"),
        (UnknownRunError("x"), "unknown_run"),
        (StartExecutionError("ThrottlingException", released=True), "start_execution_failed"),
        (InconsistentRunError("x"), "inconsistent_run"),
        (ConfigurationError("x"), "configuration"),
        (client_error("ProvisionedThroughputExceededException", 400), "aws_error"),
        (RuntimeError("x"), "internal_error"),
    ],
)
def test_every_failure_has_a_low_cardinality_reason(error: BaseException, reason: str) -> None:
    assert failure_reason(error) == reason


@pytest.mark.parametrize(
    ("count", "holders", "wait"),
    [
        (0, {}, False),
        (1, {"other": T0}, False),  # a slot is free
        (2, {"other": T0, "another": T0}, True),  # every slot held by others: wait without trying
        (2, {"claims-x": T0, "other": T0}, False),  # one is this run's: carry on under it
        (3, {"a": T0}, True),  # a count above its holders still refuses an admission
        (-3, {"a": T0, "b": T0}, True),  # and a count below them does not admit a third
    ],
)
def test_a_message_waits_without_trying_only_when_every_slot_is_held_by_another(
    count: int, holders: dict[str, str], wait: bool
) -> None:
    assert must_wait(SemaphoreState(count, holders, 1), "claims-x", 2) is wait
