"""Build the pipeline's Step Functions definition (ASL) from code.

The status conditions of the workflow's DynamoDB writes come from the one status enum
(`pipeline.status`), so they cannot drift from what the handlers and the reconciler enforce.
`pipeline.asl.json` next to this file is generated: regenerate it with

    python -m pipeline.statemachine.build            # write
    python -m pipeline.statemachine.build --check    # exit 1 when the checked-in file is stale

The definition holds CloudFormation `DefinitionSubstitutions` placeholders (`${TrackingTableName}`,
the Lambda ARNs); `load_definition` resolves them the same way for the sandbox and the tests.

Data contract (the execution input, set by the router)::

    {"job_id", "started_at", "execution_name", "bucket", "output_bucket",
     "files": [key, ...], "unsupported": [key, ...], "redaction_mode": "blackout"|"synthetic",
     "trace": {"traceparent": "..."} or {}}

`trace` is required and always an object: optional trace fields live inside it, so a run without
trace context passes `{}` and no JSONPath ever points at a missing field.
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

DEFINITION_PATH = Path(__file__).with_name("pipeline.asl.json")

# --- DefinitionSubstitutions placeholders (template.yaml sets exactly these) ---------------------
TRACKING_TABLE_NAME = "TrackingTableName"
DETECT_FUNCTION_ARN = "DetectFunctionArn"
GENERATE_SYNTHETIC_FUNCTION_ARN = "GenerateSyntheticFunctionArn"
REDACT_FUNCTION_ARN = "RedactFunctionArn"
FINALIZE_FUNCTION_ARN = "FinalizeFunctionArn"
PLACEHOLDERS: tuple[str, ...] = (
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
RETRY_INTERVAL_SECONDS = 10
RETRY_MAX_ATTEMPTS = 5
RETRY_BACKOFF_RATE = 2.5
RETRY_JITTER_STRATEGY = "FULL"  # spreads retries of parallel Map items; moto parses and applies it

# Lambda errors that are transient: Lambda service faults (names as Step Functions reports them,
# see "Handle Lambda service exceptions" in the Step Functions guide), throttling, and timeouts.
# A handler's own exception is not retried here: the handler decides what is transient.
LAMBDA_TRANSIENT_ERRORS: tuple[str, ...] = (
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.ClientExecutionTimeoutException",
    "Lambda.TooManyRequestsException",
    "Sandbox.Timedout",
    "States.Timeout",
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
TOLERANCE_ERROR = "FailureToleranceExceeded"
NO_LONGER_ACTIVE_ERROR = "JobNoLongerActive"

# Fields every job-level step carries; Map items get them too (plus their own item).
JOB_FIELDS: tuple[str, ...] = ("job_id", "started_at", "execution_name", "bucket", "output_bucket")


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
    DONE = "Done"
    MARK_TOLERANCE_FAILED = "MarkToleranceFailed"
    TOLERANCE_EXCEEDED = "ToleranceExceeded"
    MARK_JOB_FAILED = "MarkJobFailed"
    JOB_FAILED = "JobFailed"
    JOB_NO_LONGER_ACTIVE = "JobNoLongerActive"


# Which status each DynamoDB status task writes (the tests check conditions against this).
STATUS_TASKS: Mapping[State, JobStatus] = {
    State.MARK_DETECTING: JobStatus.DETECTING,
    State.MARK_DETECT_COMPLETE: JobStatus.DETECT_COMPLETE,
    State.MARK_GENERATING_SYNTHETIC: JobStatus.GENERATING_SYNTHETIC,
    State.MARK_SYNTHETIC_COMPLETE: JobStatus.SYNTHETIC_COMPLETE,
    State.MARK_REDACTING: JobStatus.REDACTING,
    State.MARK_REDACT_COMPLETE: JobStatus.REDACT_COMPLETE,
    State.WORKFLOW_COMPLETE: JobStatus.COMPLETE,
    State.MARK_TOLERANCE_FAILED: JobStatus.FAILED,
    State.MARK_JOB_FAILED: JobStatus.FAILED,
}
# Lambda tasks that work on one file inside a Map: their failure is recorded, never fatal.
PER_FILE_TASKS: tuple[State, ...] = (State.DETECT_FILE, State.REDACT_FILE)
# Lambda tasks that work on the whole job: their failure fails the job.
JOB_LAMBDA_TASKS: tuple[State, ...] = (
    State.CHECK_DETECT_TOLERANCE,
    State.GENERATE_SYNTHETIC,
    State.PREPARE_COMPLETE,
)


def placeholder(name: str) -> str:
    return "${" + name + "}"


# --- Building blocks -----------------------------------------------------------------------------
def _retry(errors: Sequence[str]) -> list[dict[str, Any]]:
    return [
        {
            "ErrorEquals": list(errors),
            "IntervalSeconds": RETRY_INTERVAL_SECONDS,
            "MaxAttempts": RETRY_MAX_ATTEMPTS,
            "BackoffRate": RETRY_BACKOFF_RATE,
            "JitterStrategy": RETRY_JITTER_STRATEGY,
        }
    ]


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


def status_update(
    target: JobStatus,
    *,
    set_values: Mapping[str, Mapping[str, Any] | str] | None = None,
) -> dict[str, Any]:
    """Parameters of an `updateItem` moving the tracking record of this run to `target`.

    SET status and updated_at (the state's entry time); while `target` is active, SET
    active_status to it (the sparse index of running jobs); on a terminal status REMOVE it.
    `set_values` adds attributes: name -> a DynamoDB AttributeValue (JSONPath keys allowed inside),
    or name -> a JSONPath string to a complete AttributeValue in the state (`{"M": ...}`, `{"S": ...}`,
    `{"NULL": true}`), passed through as is.
    The condition admits exactly `allowed_predecessors(target)`: forward only, never after a
    terminal status. A missing record fails the condition too.
    """
    names = {"#status": "status", "#updated_at": "updated_at", "#active_status": "active_status"}
    values: dict[str, Any] = {":status": {"S": target.value}, ":updated_at": _s("$$.State.EnteredTime")}
    assignments = ["#status = :status", "#updated_at = :updated_at"]
    if target.is_active:
        assignments.append("#active_status = :status")
    for attribute, value in (set_values or {}).items():
        names[f"#{attribute}"] = attribute
        if isinstance(value, str):
            values[f":{attribute}.$"] = value
        else:
            values[f":{attribute}"] = dict(value)
        assignments.append(f"#{attribute} = :{attribute}")
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


def _status_task(
    target: JobStatus,
    next_state: State,
    *,
    set_values: Mapping[str, Mapping[str, Any] | str] | None = None,
    fail_job_on_error: bool = True,
) -> dict[str, Any]:
    """A DynamoDB status write. A failed condition means the record moved on without this
    execution (reclaimed as FAILED, or finished elsewhere): stop at JobNoLongerActive. Any other
    error left after the retries fails the job with its reason (except on the FAILED writes
    themselves, which have nowhere further to go)."""
    catches = [_catch([CONDITIONAL_CHECK_FAILED], State.JOB_NO_LONGER_ACTIVE)]
    if fail_job_on_error:
        catches.append(_catch([ALL_ERRORS], State.MARK_JOB_FAILED))
    return {
        "Type": "Task",
        "Resource": "arn:aws:states:::dynamodb:updateItem",
        "Parameters": status_update(target, set_values=set_values),
        "ResultPath": None,
        "Retry": _retry(DYNAMODB_TRANSIENT_ERRORS),
        "Catch": catches,
        "Next": next_state.value,
    }


def _failed_item(phase: str, file_key_path: str) -> dict[str, Any]:
    """The result a per-file catcher records for a failed file: same shape as a detect result,
    so the redact Map and the finalize step read every item alike."""
    return {
        "Type": "Pass",
        "Parameters": {
            "file_key.$": file_key_path,
            "outcome": "failed",
            "phase": phase,
            "error.$": "$.error.Error",
            "cause.$": "$.error.Cause",
            "entity_counts": {},
            "findings_key": None,
        },
        "End": True,
    }


def _file_map(
    *,
    items_path: str,
    item_field: str,
    extra_item_fields: Mapping[str, str],
    task: State,
    function: str,
    failed: State,
    phase: str,
    file_key_path: str,
    result_path: str,
    next_state: State,
    comment: str,
) -> dict[str, Any]:
    item_selector = _job_fields() | {"trace.$": "$.trace"} | dict(extra_item_fields)
    item_selector[f"{item_field}.$"] = "$$.Map.Item.Value"
    return {
        "Type": "Map",
        "Comment": comment,
        "ItemsPath": items_path,
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
                failed.value: _failed_item(phase, file_key_path),
            },
        },
        "ResultPath": result_path,
        # Only a fault of the Map itself lands here: item failures are caught inside.
        "Catch": [_catch([ALL_ERRORS], State.MARK_JOB_FAILED)],
        "Next": next_state.value,
    }


# --- The definition -----------------------------------------------------------------------------
def build_definition() -> dict[str, Any]:
    """The workflow as an ASL dict, with `${...}` placeholders for table name and function ARNs."""
    job_failed_catch = [_catch([ALL_ERRORS], State.MARK_JOB_FAILED)]
    states: dict[str, dict[str, Any]] = {
        State.MARK_DETECTING: _status_task(JobStatus.DETECTING, State.DETECT_PII),
        State.DETECT_PII: _file_map(
            items_path="$.files",
            item_field="file_key",
            extra_item_fields={},
            task=State.DETECT_FILE,
            function=DETECT_FUNCTION_ARN,
            failed=State.DETECT_FILE_FAILED,
            phase="detect",
            file_key_path="$.file_key",
            result_path="$.detect_results",
            next_state=State.CHECK_DETECT_TOLERANCE,
            comment="Detect PII per file; a file that fails after its retries is recorded, not fatal.",
        ),
        State.CHECK_DETECT_TOLERANCE: _lambda_task(
            FINALIZE_FUNCTION_ARN,
            parameters={
                "phase": "detect",
                "job_id.$": "$.job_id",
                "started_at.$": "$.started_at",
                "files.$": "$.files",
                "unsupported.$": "$.unsupported",
                "detect_results.$": "$.detect_results",
            },
            ResultPath="$.check",
            Catch=job_failed_catch,
            Next=State.DETECT_TOLERANCE_CHOICE.value,
        ),
        # Fail closed: only an explicit `true` lets the job go on.
        State.DETECT_TOLERANCE_CHOICE: {
            "Type": "Choice",
            "Choices": [
                {
                    "Variable": "$.check.within_tolerance",
                    "BooleanEquals": True,
                    "Next": State.DROP_FILES.value,
                }
            ],
            "Default": State.MARK_TOLERANCE_FAILED.value,
        },
        State.DROP_FILES: {
            "Type": "Pass",
            "Comment": "Keep the state small: the file list and the check are not needed any more.",
            "Parameters": _job_fields()
            | {
                "detect_results.$": "$.detect_results",
                "unsupported.$": "$.unsupported",
                "redaction_mode.$": "$.redaction_mode",
                "trace.$": "$.trace",
            },
            "Next": State.MARK_DETECT_COMPLETE.value,
        },
        State.MARK_DETECT_COMPLETE: _status_task(JobStatus.DETECT_COMPLETE, State.CHECK_REDACTION_MODE),
        State.CHECK_REDACTION_MODE: {
            "Type": "Choice",
            "Choices": [
                {
                    "Variable": "$.redaction_mode",
                    "StringEquals": "synthetic",
                    "Next": State.MARK_GENERATING_SYNTHETIC.value,
                }
            ],
            "Default": State.SET_EMPTY_MAPPING.value,
        },
        State.MARK_GENERATING_SYNTHETIC: _status_task(
            JobStatus.GENERATING_SYNTHETIC, State.GENERATE_SYNTHETIC
        ),
        State.GENERATE_SYNTHETIC: _lambda_task(
            GENERATE_SYNTHETIC_FUNCTION_ARN,
            ResultPath="$.mapping",
            Catch=job_failed_catch,
            Next=State.MARK_SYNTHETIC_COMPLETE.value,
        ),
        State.MARK_SYNTHETIC_COMPLETE: _status_task(JobStatus.SYNTHETIC_COMPLETE, State.MARK_REDACTING),
        State.SET_EMPTY_MAPPING: {
            "Type": "Pass",
            "Result": {"mapping_s3_key": None},
            "ResultPath": "$.mapping",
            "Next": State.MARK_REDACTING.value,
        },
        State.MARK_REDACTING: _status_task(JobStatus.REDACTING, State.REDACT_PII),
        State.REDACT_PII: _file_map(
            items_path="$.detect_results",
            item_field="detection",
            extra_item_fields={
                "redaction_mode.$": "$.redaction_mode",
                "mapping_s3_key.$": "$.mapping.mapping_s3_key",
            },
            task=State.REDACT_FILE,
            function=REDACT_FUNCTION_ARN,
            failed=State.REDACT_FILE_FAILED,
            phase="redact",
            file_key_path="$.detection.file_key",
            result_path="$.redact_results",
            next_state=State.MARK_REDACT_COMPLETE,
            comment="Redact per file (detections that failed or were empty are skipped by the function).",
        ),
        State.MARK_REDACT_COMPLETE: _status_task(JobStatus.REDACT_COMPLETE, State.PREPARE_COMPLETE),
        State.PREPARE_COMPLETE: _lambda_task(
            FINALIZE_FUNCTION_ARN,
            parameters={
                "phase": "complete",
                "job_id.$": "$.job_id",
                "started_at.$": "$.started_at",
                "unsupported.$": "$.unsupported",
                "detect_results.$": "$.detect_results",
                "redact_results.$": "$.redact_results",
                "mapping_s3_key.$": "$.mapping.mapping_s3_key",
            },
            ResultPath="$.check",
            Catch=job_failed_catch,
            Next=State.COMPLETE_TOLERANCE_CHOICE.value,
        ),
        State.COMPLETE_TOLERANCE_CHOICE: {
            "Type": "Choice",
            "Choices": [
                {
                    "Variable": "$.check.within_tolerance",
                    "BooleanEquals": True,
                    "Next": State.WORKFLOW_COMPLETE.value,
                }
            ],
            "Default": State.MARK_TOLERANCE_FAILED.value,
        },
        State.WORKFLOW_COMPLETE: _status_task(
            JobStatus.COMPLETE,
            State.DONE,
            # The finalize function hands over ready-made AttributeValues: passed through whole.
            set_values={
                "failed_files": "$.check.failed_files_ddb",
                "redaction_results": "$.check.redaction_results_ddb",
                "mapping_s3_key": "$.check.mapping_s3_key_ddb",
            },
        ),
        State.DONE: {"Type": "Succeed"},
        State.MARK_TOLERANCE_FAILED: _status_task(
            JobStatus.FAILED,
            State.TOLERANCE_EXCEEDED,
            set_values={
                "error": {"S": TOLERANCE_ERROR},
                "cause": {
                    "S.$": "States.Format('Failed share of files {} is over the tolerance', $.check.failed_share)"
                },
                "failed_files": "$.check.failed_files_ddb",
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
            set_values={"error": _s("$.error.Error"), "cause": _s("$.error.Cause")},
            fail_job_on_error=False,
        ),
        State.JOB_FAILED: {"Type": "Fail", "ErrorPath": "$.error.Error", "CausePath": "$.error.Cause"},
        State.JOB_NO_LONGER_ACTIVE: {
            "Type": "Fail",
            "Error": NO_LONGER_ACTIVE_ERROR,
            "Cause": "The tracking record moved on without this execution (reclaimed or finished): it stops here.",
        },
    }
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
