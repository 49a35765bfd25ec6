"""The workflow's Lambda tasks as domain functions: detect, generate synthetic data, redact, and
the bookkeeping of a run (status writes, recorded failures, the final account).

Each takes plain input (the Step Functions state) and collaborators, and returns plain output
matching the contract in `pipeline/statemachine/build.py`. Per-file problems that are facts about
the file (empty, not UTF-8) are returned as outcomes, not raised: retrying cannot fix them.

Per-file results are stored in S3 (`ArtifactStore.write_result`), never handed back into the
Step Functions state: a task returns a summary of a few bytes, so a run's state holds its file
keys, counts and pointers only and stays far below the 256 KiB state limit however its files
fare. The account (`finalize`) reads every file's result from where it was stored.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pipeline.artifacts import (
    DETECT_PHASE,
    MAX_CAUSE_BYTES,
    MAX_ERROR_NAME_BYTES,
    REDACT_PHASE,
    ArtifactStore,
    Findings,
    NotUtf8Error,
    results_prefix,
    truncate_utf8,
)
from pipeline.aws import error_code
from pipeline.config import RedactionMode
from pipeline.jobs import RunRef
from pipeline.pii.types import PiiDetector
from pipeline.status import JobStatus
from pipeline.stores.tracking import TrackingStore, to_attribute

# The message of a failed file as the tracking record keeps it (with its key and error name).
MAX_MESSAGE_BYTES = 300
# Results read at once by the account: S3 answers each GET in ~10-20 ms; 100 files in well under
# a second, far inside the function's timeout.
READ_WORKERS = 8
# The error a stored result gets when a file has none (a bug, never a silent skip).
RESULT_MISSING = "ResultMissing"
NOT_REDACTED = "NotRedacted"


class JobNoLongerActive(Exception):
    """The run's record moved on without this execution (reclaimed, or finished elsewhere).

    Named as the workflow's error (`NO_LONGER_ACTIVE_ERROR`): Step Functions reports a Python
    exception under its class name, and the ASL catches exactly this one."""


class PipelineTransientError(RuntimeError):
    """An AWS call failed in a way that a later attempt can fix: the workflow retries the task."""


class ResultMissingError(RuntimeError):
    """A file has no stored detection result to redact from."""


# AWS error codes that say "try again later" (after botocore's own retries gave up).
TRANSIENT_AWS_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "TransactionConflictException",
        "InternalServerError",
        "InternalError",
        "ServiceUnavailable",
        "SlowDown",
        "RequestTimeout",
    }
)


def is_transient(exc: BaseException) -> bool:
    if error_code(exc) in TRANSIENT_AWS_CODES:
        return True
    response = getattr(exc, "response", None)
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode") if isinstance(response, dict) else None
    if isinstance(status, int) and status >= 500:
        return True
    from botocore.exceptions import ConnectionError as BotoConnectionError
    from botocore.exceptions import HTTPClientError

    return isinstance(exc, BotoConnectionError | HTTPClientError)


@contextmanager
def transient_aws_errors() -> Iterator[None]:
    """Raise a transient AWS failure as PipelineTransientError, which the workflow's Retry names."""
    try:
        yield
    except Exception as exc:
        if is_transient(exc):
            raise PipelineTransientError(f"{error_code(exc) or type(exc).__name__}: transient AWS error") from exc
        raise


def summary(result: Mapping[str, Any]) -> dict[str, Any]:
    """What a per-file task hands back to the workflow: a few bytes, never the result itself."""
    return {"outcome": result["outcome"]}


# -- per-file tasks -----------------------------------------------------------------------


def detect_file(event: Mapping[str, Any], artifacts: ArtifactStore, detector: PiiDetector) -> dict[str, Any]:
    """Detect PII in one file; the result is stored (findings in S3 too) and returned."""
    file_key = event["file_key"]
    result: dict[str, Any] = {"file_key": file_key, "phase": DETECT_PHASE, "entity_counts": {}, "findings_key": None}
    try:
        text, etag = artifacts.read_text(event["bucket"], file_key)
    except NotUtf8Error as exc:
        result |= {"outcome": "failed", "error": "NotUtf8", "message": str(exc), "cause": str(exc)}
    else:
        if not text:
            result["outcome"] = "empty"
        else:
            entities = tuple(detector.detect(text))
            key = artifacts.write_findings(event["execution_name"], Findings(file_key, etag, entities))
            result |= {
                "outcome": "ok",
                "entity_counts": dict(Counter(e.type for e in entities)),
                "findings_key": key,
            }
    artifacts.write_result(event["execution_name"], DETECT_PHASE, result)
    return result


def _detection(event: Mapping[str, Any], artifacts: ArtifactStore, file_key: str) -> dict[str, Any] | None:
    return artifacts.read_result(event["execution_name"], DETECT_PHASE, file_key)


def generate_synthetic(event: Mapping[str, Any], artifacts: ArtifactStore, secret: bytes | None = None) -> dict[str, Any]:
    """One consistent mapping for the whole job, written to the output bucket (encrypted).

    Reads the stored detection of each of the run's files (`files` in the state)."""
    # Imported here: each task function loads only the PII code it runs (finalize none of it).
    from pipeline.pii.redaction import values_by_type
    from pipeline.pii.synthetic import build_mapping

    values: dict[str, set[str]] = {}
    for file_key in event.get("files") or ():
        detection = _detection(event, artifacts, file_key)
        if not detection or detection.get("outcome") != "ok" or not detection.get("findings_key"):
            continue
        findings = artifacts.read_findings(detection["findings_key"])
        text, _ = artifacts.read_text(event["bucket"], findings.file_key, findings.etag)
        for entity_type, found in values_by_type(text, findings.entities).items():
            values.setdefault(entity_type, set()).update(found)
    mapping = build_mapping(values, secret or os.urandom(32))
    key = artifacts.write_mapping(event["execution_name"], mapping)
    return {"mapping_s3_key": key, "replacements": len(mapping)}


def redact_file(event: Mapping[str, Any], artifacts: ArtifactStore) -> dict[str, Any]:
    """Write the redacted copy of input key K to the output bucket at K; store the result."""
    from pipeline.pii.redaction import blackout, substitute

    file_key = event["file_key"]
    detection = _detection(event, artifacts, file_key)
    if detection is None:
        raise ResultMissingError("no stored detection result for this file")
    result: dict[str, Any] = {"file_key": file_key, "phase": REDACT_PHASE, "output_key": None, "replacements": 0}
    if detection.get("outcome") == "empty":
        artifacts.write_output(file_key, "")
        result |= {"outcome": "redacted", "output_key": file_key}
    elif detection.get("outcome") != "ok":
        result["outcome"] = "skipped"
    else:
        findings = artifacts.read_findings(detection["findings_key"])
        text, _ = artifacts.read_text(event["bucket"], file_key, findings.etag)
        if event.get("redaction_mode") == RedactionMode.SYNTHETIC.value:
            redacted = substitute(text, findings.entities, artifacts.read_mapping(event["mapping_s3_key"]))
        else:
            redacted = blackout(text, findings.entities)
        artifacts.write_output(file_key, redacted)
        result |= {"outcome": "redacted", "output_key": file_key, "replacements": len(findings.entities)}
    artifacts.write_result(event["execution_name"], REDACT_PHASE, result)
    return result


# -- bookkeeping: failures, status, the account -----------------------------------------------


def error_message(cause: Any) -> str:
    """The errorMessage inside a Step Functions cause (a Lambda error as JSON), shortened."""
    if not isinstance(cause, str):
        return ""
    try:
        parsed = json.loads(cause)
    except json.JSONDecodeError:
        return truncate_utf8(cause, MAX_MESSAGE_BYTES)
    if isinstance(parsed, dict):
        return truncate_utf8(str(parsed.get("errorMessage", "")), MAX_MESSAGE_BYTES)
    return truncate_utf8(cause, MAX_MESSAGE_BYTES)


def record_failure(event: Mapping[str, Any], artifacts: ArtifactStore) -> dict[str, Any]:
    """Store the failure of one file in one phase, as the per-file Catch hands it over
    (`error`: {Error, Cause}). The cause is cut to MAX_CAUSE_BYTES where it is stored."""
    error = event.get("error") or {}
    cause = str(error.get("Cause") or "")
    result = {
        "file_key": event["file_key"],
        "phase": event["phase"],
        "outcome": "failed",
        "error": truncate_utf8(str(error.get("Error") or "Unknown"), MAX_ERROR_NAME_BYTES),
        "message": error_message(cause),
        "cause": truncate_utf8(cause, MAX_CAUSE_BYTES),
    }
    artifacts.write_result(event["execution_name"], event["phase"], result)
    return summary(result)


def write_status(event: Mapping[str, Any], store: TrackingStore, now: datetime) -> dict[str, Any]:
    """Move the run's record to `target`, forward only (the condition comes from the status
    enum); a FAILED write keeps `error` and `cause` (cut to MAX_CAUSE_BYTES). The timestamp is
    ours (`format_timestamp`), so every stored timestamp has one format.
    Raises JobNoLongerActive when the record moved on without this execution."""
    target = JobStatus(event["target"])
    fields: dict[str, Any] = {}
    if target is JobStatus.FAILED:
        fields["error"] = truncate_utf8(str(event.get("error") or "Unknown"), MAX_ERROR_NAME_BYTES)
        fields["cause"] = truncate_utf8(str(event.get("cause") or ""), MAX_CAUSE_BYTES)
    written = store.transition(RunRef(event["job_id"], event["started_at"]), target, now, fields=fields)
    if written is None:
        raise JobNoLongerActive(f"the run's record did not allow {target.value}: it moved on without this execution")
    return {"status": target.value}


@dataclass(frozen=True)
class Tolerance:
    max_failed_percent: float

    def allows(self, failed: int, total: int) -> bool:
        return total == 0 or failed * 100 <= self.max_failed_percent * total


def _failure(result: Mapping[str, Any]) -> dict[str, str]:
    message = result.get("message")
    return {
        "key": result["file_key"],
        "error": truncate_utf8(str(result.get("error") or "Unknown"), MAX_ERROR_NAME_BYTES),
        "message": truncate_utf8(str(message), MAX_MESSAGE_BYTES) if message is not None else error_message(result.get("cause")),
    }


def _missing(file_key: str, phase: str) -> dict[str, Any]:
    return {
        "file_key": file_key,
        "phase": phase,
        "outcome": "failed",
        "error": RESULT_MISSING,
        "message": f"no {phase} result was stored for this file",
    }


def read_results(
    artifacts: ArtifactStore, execution_name: str, phase: str, files: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Every file's stored result of `phase` (a missing one is a failure named ResultMissing)."""
    def read(file_key: str) -> dict[str, Any]:
        return artifacts.read_result(execution_name, phase, file_key) or _missing(file_key, phase)

    if len(files) <= 1:
        return {key: read(key) for key in files}
    with ThreadPoolExecutor(max_workers=min(READ_WORKERS, len(files))) as pool:
        return dict(zip(files, pool.map(read, files), strict=True))


# Which status the record holds when each account is written (anything else: it moved on).
ACCOUNT_EXPECTED_STATUS = {"detect": JobStatus.DETECTING, "complete": JobStatus.REDACT_COMPLETE}


def account(event: Mapping[str, Any], artifacts: ArtifactStore, tolerance: Tolerance) -> dict[str, Any]:
    """Account for every file of the run from the stored results; decide the tolerance.

    phase "detect": after the detection Map; phase "complete": after the redaction Map. Returns
    the outcome (`failed_files`, `redaction_results`) and the small `check` the workflow reads.
    """
    phase = event.get("phase", "complete")
    execution_name = event["execution_name"]
    files: list[str] = list(dict.fromkeys(event.get("files") or ()))
    detections = read_results(artifacts, execution_name, DETECT_PHASE, files)
    redactions = read_results(artifacts, execution_name, REDACT_PHASE, files) if phase == "complete" else {}
    detect_failed: list[dict[str, str]] = []
    redact_failed: list[dict[str, str]] = []
    empty: list[str] = []
    entities: Counter[str] = Counter()
    redacted = replacements = 0
    for key in files:
        detection = detections[key]
        entities.update(detection.get("entity_counts") or {})
        if detection.get("outcome") == "failed":
            detect_failed.append(_failure(detection))
            continue
        if detection.get("outcome") == "empty":
            empty.append(key)
        if phase != "complete":
            continue
        redaction = redactions[key]
        if redaction.get("outcome") == "redacted":
            redacted += 1
            replacements += int(redaction.get("replacements") or 0)
        elif redaction.get("outcome") == "failed":
            redact_failed.append(_failure(redaction))
        else:  # detected (or empty) but not redacted: never silently skipped
            redact_failed.append(
                {"key": key, "error": NOT_REDACTED, "message": f"redaction ended {redaction.get('outcome')!r}"}
            )
    unsupported = sorted(set(event.get("unsupported") or ()))
    failed_files = {"detect": detect_failed, "redact": redact_failed, "unsupported": unsupported, "empty": sorted(empty)}
    total = len(files)
    failed = len(detect_failed) + len(redact_failed)
    redaction_results = {
        "files_total": total,
        "files_redacted": redacted,
        "files_failed": failed,
        "files_empty": len(empty),
        "files_unsupported": len(unsupported),
        "replacements": replacements,
        "entities_by_type": dict(sorted(entities.items())),
    }
    return {
        "phase": phase,
        "failed_files": failed_files,
        "redaction_results": redaction_results,
        "results_s3_prefix": results_prefix(execution_name),
        "check": {
            "within_tolerance": tolerance.allows(failed, total),
            "failed_share": round(failed / total, 4) if total else 0.0,
            "counts": {"files": total, "failed": failed, "entities": sum(entities.values())},
        },
    }


def record_account(dynamodb: Any, table: str, event: Mapping[str, Any], outcome: Mapping[str, Any]) -> None:
    """Write the account onto the run's record, while the record is where this phase left it.

    The record holds every file's outcome (failed files with key, error and a message cut to
    MAX_MESSAGE_BYTES); with at most MaxFilesPerRun files that stays far below DynamoDB's 400 KB.
    Raises JobNoLongerActive when the record moved on.
    """
    expected = ACCOUNT_EXPECTED_STATUS[outcome["phase"]]
    values: dict[str, Any] = {
        ":failed_files": to_attribute(outcome["failed_files"]),
        ":redaction_results": to_attribute(outcome["redaction_results"]),
        ":prefix": {"S": outcome["results_s3_prefix"]},
        ":expected": {"S": expected.value},
    }
    sets = ["failed_files = :failed_files", "redaction_results = :redaction_results", "results_s3_prefix = :prefix"]
    if outcome["phase"] == "complete":
        mapping_key = event.get("mapping_s3_key")
        values[":mapping"] = {"S": mapping_key} if mapping_key else {"NULL": True}
        sets.append("mapping_s3_key = :mapping")
    try:
        dynamodb.update_item(
            TableName=table,
            Key={"job_id": {"S": event["job_id"]}, "started_at": {"S": event["started_at"]}},
            UpdateExpression="SET " + ", ".join(sets),
            ConditionExpression="#status = :expected",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues=values,
        )
    except Exception as exc:
        if error_code(exc) == "ConditionalCheckFailedException":
            raise JobNoLongerActive(f"the run's record is no longer {expected.value}") from None
        raise


def finalize(
    event: Mapping[str, Any], artifacts: ArtifactStore, tolerance: Tolerance, dynamodb: Any, table: str
) -> dict[str, Any]:
    """Account for every file, record the account on the run, hand the workflow its check."""
    outcome = account(event, artifacts, tolerance)
    record_account(dynamodb, table, event, outcome)
    return outcome["check"]
