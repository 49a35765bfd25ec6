"""Build the pipeline's Step Functions definition (ASL) from code.

The status conditions of the workflow's status writes come from the one status enum
(`pipeline.status`), so they cannot drift from what the handlers and the reconciler enforce.
`pipeline.asl.json` next to this file is generated: regenerate it with

    python -m pipeline.statemachine.build            # write
    python -m pipeline.statemachine.build --check    # exit 1 when the checked-in file is stale

The definition holds CloudFormation `DefinitionSubstitutions` placeholders (`${TrackingTableName}`,
the Lambda ARNs, the DynamoDB integration's ARN in the stack's partition); `load_definition`
resolves them the same way for the sandbox and the tests.

Data contract (the execution input, set by the router)::

    {"job_id", "started_at", "execution_name", "bucket", "output_bucket",
     "files": [key, ...], "unsupported": [key, ...], "redaction_mode": "blackout"|"synthetic",
     "trace": {"traceparent": "..."} or {}}

`trace` is required and always an object: optional trace fields live inside it, so a run without
trace context passes `{}` and no JSONPath ever points at a missing field.

Shape. Blackout mode needs nothing across files, so one Map does it all: each file is read once,
scanned and its redacted copy written (DetectPII), then PrepareComplete accounts for the run and
writes its verdict (COMPLETE, or FAILED over the tolerance) with the account in one conditional
write. Synthetic mode needs every file's findings before the job's mapping: DetectPII stores
findings, CheckDetectTolerance records the detection account, GenerateSynthetic builds the
mapping, RedactPII writes the copies, PrepareComplete ends the run as above. A happy blackout
file costs its task two calls (read the source, write the copy), the run one more (the verdict).

Size (AWS: 256 KiB per state, input and output; docs/ARCHITECTURE.md#size-limits). The state carries the run's file
keys (at most `MaxFilesPerRun`), counts and pointers, and one summary per file and Map of at most
`pipeline.tasks.SUMMARY_MAX_BYTES` (`{"outcome", "entities"}`, in file order at `$.detections` and
`$.redactions`): a failed file's error and cause, or a larger summary, is stored in S3 and its
summary only says `stored`; the account (finalize `check`) reads S3 for those files alone and
writes the outcome onto the run's tracking record, handing back only a small check.

Timestamps. Every stored timestamp is ours (`pipeline.jobs.format_timestamp`, `…µsZ`): the status
writes after the first are finalize tasks (`action: status`, or the verdict), never `$$.State.EnteredTime`
(`…+00:00` on moto, `…msZ` on AWS) written into `updated_at`, a sort key of two indexes. The
first write (MarkDetecting) stays a DynamoDB task and leaves `updated_at` as the router wrote it
when it admitted the run, moments before.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

from pipeline.status import JobStatus, allowed_predecessors
from pipeline.tasks import TOLERANCE_CAUSE, TOLERANCE_ERROR

DEFINITION_PATH = Path(__file__).with_name("pipeline.asl.json")

# --- DefinitionSubstitutions placeholders (template.yaml sets exactly these) ---------------------
# The DynamoDB UpdateItem integration's ARN, in the stack's partition (`aws`, `aws-cn`,
# `aws-us-gov`): set by the template, where `${AWS::Partition}` is known.
DYNAMODB_UPDATE_ITEM_ARN = "DynamoDbUpdateItemArn"
TRACKING_TABLE_NAME = "TrackingTableName"
DETECT_FUNCTION_ARN = "DetectFunctionArn"
GENERATE_SYNTHETIC_FUNCTION_ARN = "GenerateSyntheticFunctionArn"
REDACT_FUNCTION_ARN = "RedactFunctionArn"
FINALIZE_FUNCTION_ARN = "FinalizeFunctionArn"
PLACEHOLDERS: tuple[str, ...] = (
    DYNAMODB_UPDATE_ITEM_ARN,
    TRACKING_TABLE_NAME,
    DETECT_FUNCTION_ARN,
    GENERATE_SYNTHETIC_FUNCTION_ARN,
    REDACT_FUNCTION_ARN,
    FINALIZE_FUNCTION_ARN,
)
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_]+)\}")

# --- Limits -------------------------------------------------------------------------------------
# A hung execution must end before the stale-job reclaim looks at its record (Settings.stale_job_minutes,
# 30 by default): otherwise the reclaim could re-queue a job whose first run still holds a slot.
WORKFLOW_TIMEOUT_SECONDS = 25 * 60
MAP_MAX_CONCURRENCY = 2

# --- Retry policy: one for every Task ---------------------------------------------------------
# The budget of one file must fit well inside the workflow timeout. A task that ran into its own
# timeout is retried once (a cold start, a slow dependency), not five times: at 120 s a call, five
# retries of a hanging file cost 12 minutes of a 25-minute run. Other transient errors fail fast
# (throttling, service faults) and get a short, capped backoff. tests/unit/test_statemachine_definition.py
# checks the worst case of a file through detect and redact against WORKFLOW_TIMEOUT_SECONDS.
RETRY_INTERVAL_SECONDS = 2
RETRY_MAX_ATTEMPTS = 2
RETRY_BACKOFF_RATE = 2.0
RETRY_MAX_DELAY_SECONDS = 30
RETRY_JITTER_STRATEGY = "FULL"  # spreads retries of parallel Map items; moto parses and applies it
TIMEOUT_RETRY_INTERVAL_SECONDS = 5
TIMEOUT_RETRY_MAX_ATTEMPTS = 1
TIMEOUT_ERRORS: tuple[str, ...] = ("Sandbox.Timedout", "States.Timeout")

# Errors of a Lambda task that are transient: Lambda service faults (names as Step Functions
# reports them, see "Handle Lambda service exceptions" in the Step Functions guide), throttling,
# timeouts, and our own PipelineTransientError (`pipeline.tasks`: an AWS call of the handler that
# failed in a way a later attempt can fix, after botocore's own retries). Any other exception of
# a handler is not retried here: the handler decides what is transient.
PIPELINE_TRANSIENT_ERROR = "PipelineTransientError"
LAMBDA_TRANSIENT_ERRORS: tuple[str, ...] = (
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.ClientExecutionTimeoutException",
    "Lambda.TooManyRequestsException",
    "Sandbox.Timedout",
    "States.Timeout",
    PIPELINE_TRANSIENT_ERROR,
)
# DynamoDB errors that are transient. Step Functions names service-integration errors
# "DynamoDB.<exception>"; the exception is named after the error code (moto does exactly that) or,
# in AWS, after the SDK's exception class where that differs (InternalServerError ->
# InternalServerErrorException, RequestLimitExceeded -> RequestLimitExceededException): both
# spellings are listed. AmazonDynamoDBException is the generic name for a fault with no modelled
# class (AWS) or a transport error (moto); it also covers a malformed request, which the unit tests
# rule out for this definition, so retrying it costs nothing in practice.
DYNAMODB_TRANSIENT_ERRORS: tuple[str, ...] = (
    "DynamoDB.ProvisionedThroughputExceededException",
    "DynamoDB.ThrottlingException",
    "DynamoDB.RequestLimitExceeded",
    "DynamoDB.RequestLimitExceededException",
    "DynamoDB.InternalServerError",
    "DynamoDB.InternalServerErrorException",
    "DynamoDB.TransactionConflictException",
    "DynamoDB.AmazonDynamoDBException",
)
CONDITIONAL_CHECK_FAILED = "DynamoDB.ConditionalCheckFailedException"
ALL_ERRORS = "States.ALL"

# --- Errors this workflow raises itself ------------------------------------------------------
# TOLERANCE_ERROR (imported): the run's error when more files failed than it tolerates.
# Raised by the finalize function (`pipeline.tasks.JobNoLongerActive`) when a conditional write
# finds the record moved on; also the Fail state's error.
NO_LONGER_ACTIVE_ERROR = "JobNoLongerActive"

# Fields every job-level step carries; Map items get them too (plus their own item).
JOB_FIELDS: tuple[str, ...] = ("job_id", "started_at", "execution_name", "bucket", "output_bucket")
# Where each Map keeps its per-file summaries (in the order of `files`).
DETECTIONS_PATH = "$.detections"
REDACTIONS_PATH = "$.redactions"


class State(StrEnum):
    """Every state name of the workflow (item processors included)."""

    MARK_DETECTING = "MarkDetecting"
    DETECT_PII = "DetectPII"
    DETECT_FILE = "DetectFile"
    DETECT_FILE_FAILED = "DetectFileFailed"
    CHECK_DETECT_TOLERANCE = "CheckDetectTolerance"
    DETECT_TOLERANCE_CHOICE = "DetectToleranceChoice"
    DROP_FILES = "DropFiles"
    MARK_DETECT_COMPLETE = "MarkDetectComplete"
    CHECK_REDACTION_MODE = "CheckRedactionMode"
    MARK_GENERATING_SYNTHETIC = "MarkGeneratingSynthetic"
    GENERATE_SYNTHETIC = "GenerateSynthetic"
    MARK_SYNTHETIC_COMPLETE = "MarkSyntheticComplete"
    SET_EMPTY_MAPPING = "SetEmptyMapping"
    MARK_REDACTING = "MarkRedacting"
    REDACT_PII = "RedactPII"
    REDACT_FILE = "RedactFile"
    REDACT_FILE_FAILED = "RedactFileFailed"
    MARK_REDACT_COMPLETE = "MarkRedactComplete"
    PREPARE_COMPLETE = "PrepareComplete"
    COMPLETE_TOLERANCE_CHOICE = "CompleteToleranceChoice"
    WORKFLOW_COMPLETE = "WorkflowComplete"
    MARK_TOLERANCE_FAILED = "MarkToleranceFailed"
    TOLERANCE_EXCEEDED = "ToleranceExceeded"
    MARK_JOB_FAILED = "MarkJobFailed"
    JOB_FAILED = "JobFailed"
    JOB_NO_LONGER_ACTIVE = "JobNoLongerActive"


# Which status each status task writes (the tests check conditions against this).
STATUS_TASKS: Mapping[State, JobStatus] = {
    State.MARK_DETECTING: JobStatus.DETECTING,
    State.MARK_DETECT_COMPLETE: JobStatus.DETECT_COMPLETE,
    State.MARK_GENERATING_SYNTHETIC: JobStatus.GENERATING_SYNTHETIC,
    State.MARK_SYNTHETIC_COMPLETE: JobStatus.SYNTHETIC_COMPLETE,
    State.MARK_REDACTING: JobStatus.REDACTING,
    State.MARK_REDACT_COMPLETE: JobStatus.REDACT_COMPLETE,
    State.MARK_TOLERANCE_FAILED: JobStatus.FAILED,
    State.MARK_JOB_FAILED: JobStatus.FAILED,
}
# PrepareComplete ends the run itself: COMPLETE, or FAILED over the tolerance, with the account.
VERDICT_TASK = State.PREPARE_COMPLETE
# The one status write done by Step Functions' DynamoDB integration (the execution's first act);
# every other status task invokes the finalize function.
DYNAMODB_STATUS_TASKS: tuple[State, ...] = (State.MARK_DETECTING,)
# Lambda tasks that work on one file inside a Map: their failure is recorded, never fatal.
PER_FILE_TASKS: tuple[State, ...] = (State.DETECT_FILE, State.REDACT_FILE)
# The tasks that store a per-file failure (the Catch of a per-file task leads there).
FAILURE_RECORDERS: Mapping[State, State] = {
    State.DETECT_FILE: State.DETECT_FILE_FAILED,
    State.REDACT_FILE: State.REDACT_FILE_FAILED,
}
# Lambda tasks that work on the whole job: their failure fails the job.
JOB_LAMBDA_TASKS: tuple[State, ...] = (
    State.CHECK_DETECT_TOLERANCE,
    State.GENERATE_SYNTHETIC,
    State.PREPARE_COMPLETE,
)
# The finalize function's actions (pipeline/handlers/finalize.py).
ACTION_STATUS = "status"
ACTION_RECORD_FAILURE = "record_failure"
ACTION_CHECK = "check"


def placeholder(name: str) -> str:
    return "${" + name + "}"


# --- Building blocks -----------------------------------------------------------------------------
def _retry(errors: Sequence[str]) -> list[dict[str, Any]]:
    """Timeouts first (Step Functions applies the first retrier that matches), once; the rest briefly."""
    timeouts = [error for error in errors if error in TIMEOUT_ERRORS]
    others = [error for error in errors if error not in TIMEOUT_ERRORS]
    retriers = []
    if timeouts:
        retriers.append(
            {
                "ErrorEquals": timeouts,
                "IntervalSeconds": TIMEOUT_RETRY_INTERVAL_SECONDS,
                "MaxAttempts": TIMEOUT_RETRY_MAX_ATTEMPTS,
            }
        )
    retriers.append(
        {
            "ErrorEquals": others,
            "IntervalSeconds": RETRY_INTERVAL_SECONDS,
            "MaxAttempts": RETRY_MAX_ATTEMPTS,
            "BackoffRate": RETRY_BACKOFF_RATE,
            "MaxDelaySeconds": RETRY_MAX_DELAY_SECONDS,
            "JitterStrategy": RETRY_JITTER_STRATEGY,
        }
    )
    return retriers


def _catch(errors: Sequence[str], next_state: State, result_path: str = "$.error") -> dict[str, Any]:
    """A catcher that keeps the state's input and adds the error under `$.error` ({Error, Cause})."""
    return {"ErrorEquals": list(errors), "ResultPath": result_path, "Next": next_state.value}


def _lambda_task(function: str, *, parameters: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """A Task invoking a Lambda function by ARN: its output is the function's return value as is.

    The direct ARN (not `arn:aws:states:::lambda:invoke`) runs both on AWS and on moto's
    interpreter and needs no `ResultSelector: {"Payload.$": "$.Payload"}`.
    """
    task: dict[str, Any] = {
        "Type": "Task",
        "Resource": placeholder(function),
        "Retry": _retry(LAMBDA_TRANSIENT_ERRORS),
    }
    if parameters is not None:
        task["Parameters"] = parameters
    task.update(fields)
    return task


def _job_fields() -> dict[str, str]:
    return {f"{name}.$": f"$.{name}" for name in JOB_FIELDS}


def _s(path: str) -> dict[str, str]:
    """A DynamoDB string AttributeValue read from a JSONPath."""
    return {"S.$": path}


def status_update(target: JobStatus) -> dict[str, Any]:
    """Parameters of the `updateItem` that moves the tracking record of this run to `target`
    (used for the first status write only: see the module doc).

    SET status and, while `target` is active, active_status (the sparse index of running jobs);
    on a terminal status REMOVE it. `updated_at` is left as the router wrote it.
    The condition admits exactly `allowed_predecessors(target)`: forward only, never after a
    terminal status. A missing record fails the condition too.
    """
    names = {"#status": "status", "#active_status": "active_status"}
    values: dict[str, Any] = {":status": {"S": target.value}}
    assignments = ["#status = :status"]
    if target.is_active:
        assignments.append("#active_status = :status")
    expression = "SET " + ", ".join(assignments)
    if target.is_terminal:
        expression += " REMOVE #active_status"
    allowed = []
    for index, status in enumerate(allowed_predecessors(target)):
        values[f":from{index}"] = {"S": status.value}
        allowed.append(f":from{index}")
    return {
        "TableName": placeholder(TRACKING_TABLE_NAME),
        "Key": {"job_id": _s("$.job_id"), "started_at": _s("$.started_at")},
        "UpdateExpression": expression,
        "ConditionExpression": f"#status IN ({', '.join(allowed)})",
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


def _dynamodb_status_task(target: JobStatus, next_state: State) -> dict[str, Any]:
    """A DynamoDB status write. A failed condition means the record moved on without this
    execution (reclaimed as FAILED, or finished elsewhere): stop at JobNoLongerActive. Any other
    error left after the retries fails the job with its reason."""
    return {
        "Type": "Task",
        "Resource": placeholder(DYNAMODB_UPDATE_ITEM_ARN),
        "Parameters": status_update(target),
        "ResultPath": None,
        "Retry": _retry(DYNAMODB_TRANSIENT_ERRORS),
        "Catch": [
            _catch([CONDITIONAL_CHECK_FAILED], State.JOB_NO_LONGER_ACTIVE),
            _catch([ALL_ERRORS], State.MARK_JOB_FAILED),
        ],
        "Next": next_state.value,
    }


def _status_task(
    target: JobStatus,
    next_state: State,
    *,
    fields: Mapping[str, str] | None = None,
    fail_job_on_error: bool = True,
) -> dict[str, Any]:
    """A status write by the finalize function (forward only, our timestamp format). A record
    that moved on without this execution raises JobNoLongerActive: stop there. Any other error
    left after the retries fails the job with its reason (except on the FAILED writes
    themselves, which have nowhere further to go). `fields`: extra Parameters (error, cause)."""
    catches = [_catch([NO_LONGER_ACTIVE_ERROR], State.JOB_NO_LONGER_ACTIVE)]
    if fail_job_on_error:
        catches.append(_catch([ALL_ERRORS], State.MARK_JOB_FAILED))
    parameters = {
        "action": ACTION_STATUS,
        "target": target.value,
        "table": placeholder(TRACKING_TABLE_NAME),
        "job_id.$": "$.job_id",
        "started_at.$": "$.started_at",
        "execution_name.$": "$.execution_name",
        **(fields or {}),
    }
    return _lambda_task(
        FINALIZE_FUNCTION_ARN, parameters=parameters, ResultPath=None, Catch=catches, Next=next_state.value
    )


def _check_task(phase: str, next_state: State, extra: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The account: takes every file's summary the Maps kept (S3 only for stored ones), writes
    the outcome on the record (at the end with the run's verdict), hands back the small check
    (within_tolerance, failed_share, counts) at `$.check`."""
    parameters = {
        "action": ACTION_CHECK,
        "phase": phase,
        **_job_fields(),
        "files.$": "$.files",
        "unsupported.$": "$.unsupported",
        **(extra or {}),
    }
    return _lambda_task(
        FINALIZE_FUNCTION_ARN,
        parameters=parameters,
        ResultPath="$.check",
        Catch=[
            _catch([NO_LONGER_ACTIVE_ERROR], State.JOB_NO_LONGER_ACTIVE),
            _catch([ALL_ERRORS], State.MARK_JOB_FAILED),
        ],
        Next=next_state.value,
    )


def _failure_recorder(phase: str) -> dict[str, Any]:
    """Store a failed file's error (the Catch put it at `$.error`) as that file's result of
    `phase`, through the finalize function; the item's output is `{"outcome": "failed", "stored": true}`.
    A recorder that fails after its retries fails the Map, and so the job."""
    return _lambda_task(
        FINALIZE_FUNCTION_ARN,
        parameters={
            "action": ACTION_RECORD_FAILURE,
            "phase": phase,
            **_job_fields(),
            "file_key.$": "$.file_key",
            "error.$": "$.error",
        },
        End=True,
    )


def _file_map(
    *,
    extra_item_fields: Mapping[str, str],
    task: State,
    function: str,
    phase: str,
    result_path: str,
    next_state: State,
    comment: str,
) -> dict[str, Any]:
    item_selector = _job_fields() | {"trace.$": "$.trace"} | dict(extra_item_fields)
    item_selector["file_key.$"] = "$$.Map.Item.Value"
    failed = FAILURE_RECORDERS[task]
    return {
        "Type": "Map",
        "Comment": comment,
        "ItemsPath": "$.files",
        "MaxConcurrency": MAP_MAX_CONCURRENCY,
        "ItemSelector": item_selector,
        "ItemProcessor": {
            "ProcessorConfig": {"Mode": "INLINE"},
            "StartAt": task.value,
            "States": {
                task.value: _lambda_task(
                    function,
                    Catch=[_catch([ALL_ERRORS], failed)],
                    End=True,
                ),
                failed.value: _failure_recorder(phase),
            },
        },
        # One small summary per file, in file order (the account reads them).
        "ResultPath": result_path,
        # Only a fault of the Map itself lands here: item failures are caught inside.
        "Catch": [_catch([ALL_ERRORS], State.MARK_JOB_FAILED)],
        "Next": next_state.value,
    }


def _tolerance_choice(go_on: State, otherwise: State) -> dict[str, Any]:
    """Fail closed: only an explicit `true` lets the job go on."""
    return {
        "Type": "Choice",
        "Choices": [{"Variable": "$.check.within_tolerance", "BooleanEquals": True, "Next": go_on.value}],
        "Default": otherwise.value,
    }


def _carried(**fields: Any) -> dict[str, Any]:
    """A Pass state's Parameters: the job's fields and what later states read, nothing else."""
    return _job_fields() | {
        "files.$": "$.files",
        "unsupported.$": "$.unsupported",
        "redaction_mode.$": "$.redaction_mode",
        "trace.$": "$.trace",
        "detections.$": DETECTIONS_PATH,
        **fields,
    }


# --- The definition -----------------------------------------------------------------------------
States = dict[State, dict[str, Any]]


def _detect_states() -> States:
    """Detect every file, then branch on the redaction mode (blackout redacts while detecting)."""
    return {
        State.MARK_DETECTING: _dynamodb_status_task(JobStatus.DETECTING, State.DETECT_PII),
        State.DETECT_PII: _file_map(
            extra_item_fields={"redaction_mode.$": "$.redaction_mode"},
            task=State.DETECT_FILE,
            function=DETECT_FUNCTION_ARN,
            phase="detect",
            result_path=DETECTIONS_PATH,
            next_state=State.CHECK_REDACTION_MODE,
            comment="Detect PII per file (blackout: and write the redacted copy in the same pass); "
            "a file that fails after its retries is recorded, not fatal.",
        ),
        State.CHECK_REDACTION_MODE: {
            "Type": "Choice",
            "Choices": [
                {
                    "Variable": "$.redaction_mode",
                    "StringEquals": "synthetic",
                    "Next": State.CHECK_DETECT_TOLERANCE.value,
                }
            ],
            "Default": State.SET_EMPTY_MAPPING.value,
        },
    }


def _synthetic_states() -> States:
    """Synthetic mode: hold the detect phase to the tolerance, then build the replacement mapping
    (blackout skips to the verdict with an empty mapping)."""
    return {
        State.SET_EMPTY_MAPPING: {
            "Type": "Pass",
            "Comment": "Blackout: every file was redacted in DetectPII; no mapping, no redaction Map.",
            "Parameters": _carried(mapping={"mapping_s3_key": None}, redactions=None),
            "Next": State.PREPARE_COMPLETE.value,
        },
        State.CHECK_DETECT_TOLERANCE: _check_task(
            "detect", State.DETECT_TOLERANCE_CHOICE, {"detections.$": DETECTIONS_PATH}
        ),
        State.DETECT_TOLERANCE_CHOICE: _tolerance_choice(State.DROP_FILES, State.MARK_TOLERANCE_FAILED),
        State.DROP_FILES: {
            "Type": "Pass",
            "Comment": "Keep the state small: only what later states read (the check is dropped).",
            "Parameters": _carried(),
            "Next": State.MARK_DETECT_COMPLETE.value,
        },
        State.MARK_DETECT_COMPLETE: _status_task(JobStatus.DETECT_COMPLETE, State.MARK_GENERATING_SYNTHETIC),
        State.MARK_GENERATING_SYNTHETIC: _status_task(
            JobStatus.GENERATING_SYNTHETIC, State.GENERATE_SYNTHETIC
        ),
        State.GENERATE_SYNTHETIC: _lambda_task(
            GENERATE_SYNTHETIC_FUNCTION_ARN,
            parameters=_job_fields()
            | {"files.$": "$.files", "detections.$": DETECTIONS_PATH, "trace.$": "$.trace"},
            ResultSelector={"mapping_s3_key.$": "$.mapping_s3_key"},
            ResultPath="$.mapping",
            Catch=[_catch([ALL_ERRORS], State.MARK_JOB_FAILED)],
            Next=State.MARK_SYNTHETIC_COMPLETE.value,
        ),
        State.MARK_SYNTHETIC_COMPLETE: _status_task(JobStatus.SYNTHETIC_COMPLETE, State.MARK_REDACTING),
    }


def _redact_states() -> States:
    """Redact every file with the mapping (synthetic mode only)."""
    return {
        State.MARK_REDACTING: _status_task(JobStatus.REDACTING, State.REDACT_PII),
        State.REDACT_PII: _file_map(
            extra_item_fields={
                "redaction_mode.$": "$.redaction_mode",
                "mapping_s3_key.$": "$.mapping.mapping_s3_key",
                # this file's detection summary: the detect Map's output is in file order
                "detection.$": f"States.ArrayGetItem({DETECTIONS_PATH}, $$.Map.Item.Index)",
            },
            task=State.REDACT_FILE,
            function=REDACT_FUNCTION_ARN,
            phase="redact",
            result_path=REDACTIONS_PATH,
            next_state=State.MARK_REDACT_COMPLETE,
            comment="Redact per file (files whose detection failed are skipped by the function).",
        ),
        State.MARK_REDACT_COMPLETE: _status_task(JobStatus.REDACT_COMPLETE, State.PREPARE_COMPLETE),
    }


def _outcome_states() -> States:
    """The verdict against the tolerance, and every way the workflow ends."""
    return {
        State.PREPARE_COMPLETE: _check_task(
            "complete",
            State.COMPLETE_TOLERANCE_CHOICE,
            {
                "detections.$": DETECTIONS_PATH,
                "redactions.$": REDACTIONS_PATH,
                "redaction_mode.$": "$.redaction_mode",
                "mapping_s3_key.$": "$.mapping.mapping_s3_key",
            },
        ),
        State.COMPLETE_TOLERANCE_CHOICE: _tolerance_choice(State.WORKFLOW_COMPLETE, State.TOLERANCE_EXCEEDED),
        State.WORKFLOW_COMPLETE: {"Type": "Succeed", "Comment": "PrepareComplete wrote COMPLETE with the account."},
        State.MARK_TOLERANCE_FAILED: _status_task(
            JobStatus.FAILED,
            State.TOLERANCE_EXCEEDED,
            fields={
                "error": TOLERANCE_ERROR,
                "cause.$": f"States.Format('{TOLERANCE_CAUSE}', $.check.failed_share)",
            },
            fail_job_on_error=False,
        ),
        State.TOLERANCE_EXCEEDED: {
            "Type": "Fail",
            "Error": TOLERANCE_ERROR,
            "Cause": "More files failed than the job tolerates; the tracking record lists them.",
        },
        State.MARK_JOB_FAILED: _status_task(
            JobStatus.FAILED,
            State.JOB_FAILED,
            fields={"error.$": "$.error.Error", "cause.$": "$.error.Cause"},
            fail_job_on_error=False,
        ),
        State.JOB_FAILED: {"Type": "Fail", "ErrorPath": "$.error.Error", "CausePath": "$.error.Cause"},
        State.JOB_NO_LONGER_ACTIVE: {
            "Type": "Fail",
            "Error": NO_LONGER_ACTIVE_ERROR,
            "Cause": "The tracking record moved on without this execution (reclaimed or finished): it stops here.",
        },
    }


def build_definition() -> dict[str, Any]:
    """The workflow as an ASL dict, with `${...}` placeholders for table name and function ARNs."""
    states = _detect_states() | _synthetic_states() | _redact_states() | _outcome_states()
    return {
        "Comment": "pipeops reference pipeline: detect PII per file, optionally build a synthetic "
        "mapping, redact per file, record the outcome. Generated by pipeline/statemachine/build.py.",
        "StartAt": State.MARK_DETECTING.value,
        "TimeoutSeconds": WORKFLOW_TIMEOUT_SECONDS,
        "States": {name.value: state for name, state in states.items()},
    }


# --- Rendering and loading ----------------------------------------------------------------------
def render_definition(definition: Mapping[str, Any] | None = None) -> str:
    """The checked-in text: pretty JSON, keys sorted (stable diffs), trailing newline."""
    definition = build_definition() if definition is None else definition
    return json.dumps(definition, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def load_definition(substitutions: Mapping[str, str], path: Path | None = None) -> str:
    """The checked-in definition with every `${Name}` replaced, as CloudFormation's
    DefinitionSubstitutions does. Values are JSON-escaped (they land inside JSON strings).
    Raises KeyError naming any placeholder left without a value."""
    text = (path or DEFINITION_PATH).read_text(encoding="utf-8")
    missing = sorted({name for name in _PLACEHOLDER.findall(text) if name not in substitutions})
    if missing:
        raise KeyError(f"no substitution for placeholder(s): {', '.join(missing)}")
    return _PLACEHOLDER.sub(lambda match: json.dumps(str(substitutions[match.group(1)]))[1:-1], text)


def write_definition(path: Path = DEFINITION_PATH) -> bool:
    """Write the generated definition; True when the file changed."""
    text = render_definition()
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.write_text(text, encoding="utf-8")
    return True


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--check"]:
        current = DEFINITION_PATH.read_text(encoding="utf-8") if DEFINITION_PATH.exists() else ""
        if current != render_definition():
            print(
                f"{DEFINITION_PATH} is out of date: run python -m pipeline.statemachine.build",
                file=sys.stderr,
            )
            return 1
        return 0
    if args:
        print("usage: python -m pipeline.statemachine.build [--check]", file=sys.stderr)
        return 2
    changed = write_definition()
    print(f"{'wrote' if changed else 'unchanged'}: {DEFINITION_PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
