"""The workflow's Lambda tasks as domain functions: detect (and, in blackout mode, redact in the
same pass), generate synthetic data, redact, and the bookkeeping of a run (status writes,
recorded failures, the account).

Each takes plain input (the Step Functions state) and collaborators, and returns plain output
matching the contract in `pipeline/statemachine/build.py`. Per-file problems that are facts about
the file (empty, not UTF-8) are returned as outcomes, not raised: retrying cannot fix them.

What a file's task hands back (`hand_back`) is a summary of at most `SUMMARY_MAX_BYTES`: the
outcome and the entity counts (a list in `SUMMARY_ENTITY_ORDER`, so a file with all six types
still fits), which the Map keeps, one per file in the order of `files`. A failure (its error,
message and cause) or a summary that would be larger is stored in S3
(`ArtifactStore.write_result`) and handed back as `{"outcome", "stored": true}`: so a run's state
stays far below the 256 KiB state limit however its files fare, and the account (`account`)
reads S3 only for those files. A file that went well costs no call beyond its own data.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
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
    findings_key,
    results_prefix,
    truncate_utf8,
)
from pipeline.aws import error_code
from pipeline.config import RedactionMode
from pipeline.jobs import RunRef
from pipeline.pii.types import EntityType, PiiDetector
from pipeline.status import FailedFileKind, FileOutcome, JobStatus
from pipeline.stores.tracking import RunRecord, TrackingStore

# The message of a failed file as the tracking record keeps it (with its key and error name).
MAX_MESSAGE_BYTES = 300
# The largest summary a per-file task hands back into the state (compact JSON, UTF-8 bytes); a
# larger one (a file with many entity types) is stored in S3. Two Maps' worth of MaxFilesPerRun
# summaries keep the largest state under half of the 256 KiB limit
# (tests/unit/test_run_size_limits.py has the arithmetic).
SUMMARY_MAX_BYTES = 120
# The order of the entity counts in a summary (`{"entities": [3, 0, 1]}`: 3 EMAIL, 1 SSN), so
# that a file with every type fits SUMMARY_MAX_BYTES (`{"EMAIL": 3, ...}` with all six names is
# ~170 bytes). Append only: a summary written by one deployment may be read by the next.
SUMMARY_ENTITY_ORDER: tuple[str, ...] = (
    EntityType.EMAIL,
    EntityType.PHONE,
    EntityType.SSN,
    EntityType.CREDIT_DEBIT_NUMBER,
    EntityType.IP_ADDRESS,
    EntityType.INTERNATIONAL_BANK_ACCOUNT_NUMBER,
)
# Results read at once by the account: S3 answers each GET in ~10-20 ms; 100 files in well under
# a second, far inside the function's timeout.
READ_WORKERS = 8
# The run's error when more files failed than it tolerates (also the workflow's Fail state's),
# and its cause ({} is the failed share; the workflow formats it with States.Format too).
TOLERANCE_ERROR = "FailureToleranceExceeded"
TOLERANCE_CAUSE = "Failed share of files {} is over the tolerance"
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


def _summary_size(summary: Mapping[str, Any]) -> int:
    return len(json.dumps(summary, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def summary_counts(counts: Mapping[str, int]) -> list[int] | None:
    """Entity counts as a summary holds them: a list in SUMMARY_ENTITY_ORDER without trailing
    zeros. None when a type is not in the order: such a result is stored, never cut. Pure."""
    if not set(counts) <= set(SUMMARY_ENTITY_ORDER):
        return None
    listed = [int(counts.get(entity_type, 0)) for entity_type in SUMMARY_ENTITY_ORDER]
    while listed and not listed[-1]:
        listed.pop()
    return listed


def counts_from_summary(entities: Sequence[int] | Mapping[str, int] | None) -> dict[str, int]:
    """The entity counts of a summary's `entities`, back by type. A mapping (by type) is what a
    deployment before SUMMARY_ENTITY_ORDER handed back, read as it is by a run across a deploy. Pure."""
    if isinstance(entities, Mapping):
        return {str(entity_type): int(n) for entity_type, n in entities.items()}
    return {entity_type: int(n) for entity_type, n in zip(SUMMARY_ENTITY_ORDER, entities or (), strict=False) if n}


def hand_back(event: Mapping[str, Any], artifacts: ArtifactStore, result: Mapping[str, Any]) -> dict[str, Any]:
    """What a per-file task hands back into its Map item: `{"outcome", "entities"?, "redacted"?,
    "replacements"?}` when it went well and is small; otherwise the result is stored in S3 and
    the item says only `{"outcome", "stored": true}` (and `redacted`), which the account reads."""
    small: dict[str, Any] = {"outcome": result["outcome"]}
    counts = summary_counts(result.get("entity_counts") or {})
    if counts:
        small["entities"] = counts
    if result.get("redacted"):
        small["redacted"] = True
    if result["phase"] == REDACT_PHASE and result.get("replacements"):
        small["replacements"] = int(result["replacements"])
    if result["outcome"] != FileOutcome.FAILED and counts is not None and _summary_size(small) <= SUMMARY_MAX_BYTES:
        return small
    artifacts.write_result(event["execution_name"], result["phase"], dict(result))
    return {"outcome": result["outcome"], "stored": True} | ({"redacted": True} if result.get("redacted") else {})


# -- per-file tasks -----------------------------------------------------------------------


def detect_file(event: Mapping[str, Any], artifacts: ArtifactStore, detector: PiiDetector) -> dict[str, Any]:
    """Detect PII in one file and return its result (not stored: see `hand_back`).

    Blackout mode (`redaction_mode`) needs nothing from the other files, so the redacted copy is
    written in the same pass (`redacted`): the source is read once and no findings are stored.
    Otherwise the findings (offsets, never values) are stored for the synthetic mapping and the
    redaction that follow.
    """
    from pipeline.pii.redaction import blackout

    file_key = event["file_key"]
    in_one_pass = event.get("redaction_mode") == RedactionMode.BLACKOUT.value
    result: dict[str, Any] = {"file_key": file_key, "phase": DETECT_PHASE, "entity_counts": {}}
    try:
        text, etag = artifacts.read_text(event["bucket"], file_key)
    except NotUtf8Error as exc:
        return result | {"outcome": FileOutcome.FAILED.value, "error": "NotUtf8", "message": str(exc), "cause": str(exc)}
    if not text:
        result["outcome"] = FileOutcome.EMPTY.value
        if in_one_pass:
            artifacts.write_output(file_key, "")
            result["redacted"] = True
        return result
    entities = tuple(detector.detect(text))
    result |= {"outcome": FileOutcome.OK.value, "entity_counts": dict(Counter(e.type for e in entities))}
    if in_one_pass:
        artifacts.write_output(file_key, blackout(text, entities))
        result |= {"redacted": True, "replacements": len(entities)}
    else:
        artifacts.write_findings(event["execution_name"], Findings(file_key, etag, entities))
    return result


def _paired(files: Sequence[str], summaries: Sequence[Mapping[str, Any] | None] | None) -> list[tuple[str, Mapping[str, Any] | None]]:
    """Each file with its summary from a Map's output (in file order); None where there is none."""
    listed = list(summaries or ())
    return [(key, listed[index] if index < len(listed) else None) for index, key in enumerate(files)]


def _detections(event: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any] | None]]:
    """Each file of the run with its detection summary (the detect Map's output)."""
    return _paired(list(event.get("files") or ()), event.get("detections"))


def generate_synthetic(event: Mapping[str, Any], artifacts: ArtifactStore, secret: bytes | None = None) -> dict[str, Any]:
    """One consistent mapping for the whole job, written to the output bucket (encrypted).

    Reads the findings of each file whose detection found text (`files` and `detections`)."""
    # Imported here: each task function loads only the PII code it runs (finalize none of it).
    from pipeline.pii.redaction import values_by_type
    from pipeline.pii.synthetic import build_mapping

    values: dict[str, set[str]] = {}
    for file_key, detection in _detections(event):
        if not detection or detection.get("outcome") != FileOutcome.OK:
            continue
        findings = artifacts.read_findings(findings_key(event["execution_name"], file_key))
        text, _ = artifacts.read_text(event["bucket"], findings.file_key, findings.etag)
        for entity_type, found in values_by_type(text, findings.entities).items():
            values.setdefault(entity_type, set()).update(found)
    mapping = build_mapping(values, secret or os.urandom(32))
    key = artifacts.write_mapping(event["execution_name"], mapping)
    return {"mapping_s3_key": key, "replacements": len(mapping)}


def redact_file(event: Mapping[str, Any], artifacts: ArtifactStore) -> dict[str, Any]:
    """Write the redacted copy of input key K to the output bucket at K; return the result.

    `detection` is the file's detection summary (the workflow picks it from the detect Map's
    output); the findings are read from where detection stored them."""
    from pipeline.pii.redaction import blackout, substitute

    file_key = event["file_key"]
    detection = event.get("detection")
    if not detection:
        raise ResultMissingError("no detection result for this file")
    result: dict[str, Any] = {"file_key": file_key, "phase": REDACT_PHASE, "output_key": None, "replacements": 0}
    if detection.get("outcome") == FileOutcome.EMPTY:
        artifacts.write_output(file_key, "")
        result |= {"outcome": FileOutcome.REDACTED.value, "output_key": file_key}
    elif detection.get("outcome") != FileOutcome.OK:
        result["outcome"] = FileOutcome.SKIPPED.value
    else:
        findings = artifacts.read_findings(findings_key(event["execution_name"], file_key))
        text, _ = artifacts.read_text(event["bucket"], file_key, findings.etag)
        if event.get("redaction_mode") == RedactionMode.SYNTHETIC.value:
            redacted = substitute(text, findings.entities, artifacts.read_mapping(event["mapping_s3_key"]))
        else:
            redacted = blackout(text, findings.entities)
        artifacts.write_output(file_key, redacted)
        result |= {"outcome": FileOutcome.REDACTED.value, "output_key": file_key, "replacements": len(findings.entities)}
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
        "outcome": FileOutcome.FAILED.value,
        "error": truncate_utf8(str(error.get("Error") or "Unknown"), MAX_ERROR_NAME_BYTES),
        "message": error_message(cause),
        "cause": truncate_utf8(cause, MAX_CAUSE_BYTES),
    }
    return hand_back(event, artifacts, result)


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
        "outcome": FileOutcome.FAILED.value,
        "error": RESULT_MISSING,
        "message": f"no {phase} result was stored for this file",
    }


def _from_summary(file_key: str, phase: str, summary: Mapping[str, Any]) -> dict[str, Any]:
    result = {key: summary[key] for key in ("outcome", "redacted", "replacements") if key in summary}
    return {"file_key": file_key, "phase": phase, "entity_counts": counts_from_summary(summary.get("entities"))} | result


def resolve_results(
    artifacts: ArtifactStore, execution_name: str, phase: str, handed_back: Sequence[tuple[str, Mapping[str, Any] | None]]
) -> dict[str, dict[str, Any]]:
    """Every file's result of `phase`, from what its task handed back (`hand_back`); S3 is read
    only for a result that was stored, or a file the Map's output has no summary for. A file
    with neither is a failure named ResultMissing (a bug, never a silent skip)."""
    results: dict[str, dict[str, Any]] = {}
    to_read: list[str] = []
    for file_key, summary in handed_back:
        if file_key in results or file_key in to_read:
            continue
        if summary and not summary.get("stored"):
            results[file_key] = _from_summary(file_key, phase, summary)
        else:
            to_read.append(file_key)

    def read(file_key: str) -> dict[str, Any]:
        return artifacts.read_result(execution_name, phase, file_key) or _missing(file_key, phase)

    if len(to_read) == 1:
        results[to_read[0]] = read(to_read[0])
    elif to_read:
        with ThreadPoolExecutor(max_workers=min(READ_WORKERS, len(to_read))) as pool:
            results.update(zip(to_read, pool.map(read, to_read), strict=True))
    return results


def _redacted_in_one_pass(detection: Mapping[str, Any]) -> dict[str, Any]:
    counts = detection.get("entity_counts") or {}
    return {"outcome": FileOutcome.REDACTED.value, "replacements": int(detection.get("replacements", sum(counts.values())))}


@dataclass
class _Tally:
    """What the account adds up over a run's files, in file order."""

    detect_failed: list[dict[str, str]] = field(default_factory=list)
    redact_failed: list[dict[str, str]] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    entities: Counter[str] = field(default_factory=Counter)
    redacted: int = 0
    replacements: int = 0

    def add_redaction(self, key: str, redaction: Mapping[str, Any]) -> None:
        if redaction.get("outcome") == FileOutcome.REDACTED:
            self.redacted += 1
            self.replacements += int(redaction.get("replacements") or 0)
        elif redaction.get("outcome") == FileOutcome.FAILED:
            self.redact_failed.append(_failure(redaction))
        else:  # detected (or empty) but not redacted: never silently skipped
            self.redact_failed.append(
                {"key": key, "error": NOT_REDACTED, "message": f"redaction ended {redaction.get('outcome')!r}"}
            )


def _redactions(
    artifacts: ArtifactStore,
    event: Mapping[str, Any],
    handed_back: Sequence[tuple[str, Mapping[str, Any] | None]],
    detections: Mapping[str, Mapping[str, Any]],
) -> dict[str, dict[str, Any]]:
    """The redaction Map's results of the files it redacted (not those redacted in one pass, nor
    those whose detection failed)."""
    paired = _paired([key for key, _ in handed_back], event.get("redactions"))
    redacted_by_map = [
        (key, redaction)
        for key, redaction in paired
        if not detections[key].get("redacted") and detections[key].get("outcome") != FileOutcome.FAILED
    ]
    return resolve_results(artifacts, event["execution_name"], REDACT_PHASE, redacted_by_map)


def _tally(
    files: Sequence[str],
    detections: Mapping[str, Mapping[str, Any]],
    redactions: Mapping[str, Mapping[str, Any]] | None,
) -> _Tally:
    """Every file's detection and (when `redactions` is given: the run is complete) redaction. Pure."""
    tally = _Tally()
    for key in files:
        detection = detections[key]
        tally.entities.update(detection.get("entity_counts") or {})
        if detection.get("outcome") == FileOutcome.FAILED:
            tally.detect_failed.append(_failure(detection))
            continue
        if detection.get("outcome") == FileOutcome.EMPTY:
            tally.empty.append(key)
        if redactions is not None:
            tally.add_redaction(key, _redacted_in_one_pass(detection) if detection.get("redacted") else redactions[key])
    return tally


def account(event: Mapping[str, Any], artifacts: ArtifactStore, tolerance: Tolerance) -> dict[str, Any]:
    """Account for every file of the run from what its tasks handed back; decide the tolerance.

    phase "detect": after the detection Map (synthetic mode); phase "complete": at the end, from
    the detections (`redacted` in one pass in blackout mode) and, in synthetic mode, the
    redaction Map's output (`redactions`). Returns the outcome (`failed_files`,
    `redaction_results`) and the small `check` the workflow reads.
    """
    phase = event.get("phase", "complete")
    execution_name = event["execution_name"]
    handed_back = _detections(event)
    files: list[str] = list(dict.fromkeys(key for key, _ in handed_back))
    detections = resolve_results(artifacts, execution_name, DETECT_PHASE, handed_back)
    redactions = _redactions(artifacts, event, handed_back, detections) if phase == "complete" else None
    tally = _tally(files, detections, redactions)
    unsupported = sorted(set(event.get("unsupported") or ()))
    total, failed = len(files), len(tally.detect_failed) + len(tally.redact_failed)
    return {
        "phase": phase,
        "failed_files": {
            FailedFileKind.DETECT.value: tally.detect_failed,
            FailedFileKind.REDACT.value: tally.redact_failed,
            FailedFileKind.UNSUPPORTED.value: unsupported,
            FailedFileKind.EMPTY.value: sorted(tally.empty),
        },
        "redaction_results": {
            "files_total": total,
            "files_redacted": tally.redacted,
            "files_failed": failed,
            "files_empty": len(tally.empty),
            "files_unsupported": len(unsupported),
            "replacements": tally.replacements,
            "entities_by_type": dict(sorted(tally.entities.items())),
        },
        "results_s3_prefix": results_prefix(execution_name),
        "check": {
            "within_tolerance": tolerance.allows(failed, total),
            "failed_share": round(failed / total, 4) if total else 0.0,
            "counts": {"files": total, "failed": failed, "entities": sum(tally.entities.values())},
        },
    }


def _account_fields(outcome: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "failed_files": outcome["failed_files"],
        "redaction_results": outcome["redaction_results"],
        "results_s3_prefix": outcome["results_s3_prefix"],
    }


def record_account(store: TrackingStore, event: Mapping[str, Any], outcome: Mapping[str, Any], now: datetime) -> None:
    """Write the detection account onto the run's record, while the record is DETECTING.

    The record holds every file's outcome (failed files with key, error and a message cut to
    MAX_MESSAGE_BYTES); with at most MaxFilesPerRun files that stays far below DynamoDB's 400 KB.
    Raises JobNoLongerActive when the record moved on.
    """
    run = RunRef(event["job_id"], event["started_at"])
    expected = JobStatus.DETECTING
    if store.transition(run, expected, now, fields=_account_fields(outcome), expected_status=expected) is None:
        raise JobNoLongerActive(f"the run's record is no longer {expected.value}")


def record_verdict(
    store: TrackingStore, event: Mapping[str, Any], outcome: Mapping[str, Any], now: datetime
) -> RunRecord | None:
    """End the run in one conditional write: COMPLETE, or FAILED when more files failed than the
    job tolerates, together with the account, and its files counted for the on-time objective
    (`pipeline.deadline`). The record must be where the workflow left it
    (DETECTING after the one-pass blackout Map, REDACT_COMPLETE after a synthetic redaction); a
    retried attempt whose first write landed finds its own verdict and succeeds again (a FAILED
    with another error is someone else's: the run moved on).
    Returns the record this call wrote; None when an earlier attempt wrote it (and counted it).
    Raises JobNoLongerActive when the record moved on without this execution."""
    check = outcome["check"]
    target = JobStatus.COMPLETE if check["within_tolerance"] else JobStatus.FAILED
    synthetic = event.get("redaction_mode") == RedactionMode.SYNTHETIC.value
    fields = _account_fields(outcome) | {"mapping_s3_key": event.get("mapping_s3_key") or None}
    if target is JobStatus.FAILED:
        fields |= {"error": TOLERANCE_ERROR, "cause": TOLERANCE_CAUSE.format(check["failed_share"])}
    run = RunRef(event["job_id"], event["started_at"])
    expected = JobStatus.REDACT_COMPLETE if synthetic else JobStatus.DETECTING
    written = store.transition(run, target, now, fields=fields, expected_status=expected, count_deadline=True)
    if written is None:
        current = store.get_run(run)
        ours = current is not None and current.status is target
        if ours and target is JobStatus.FAILED:
            ours = current is not None and current.error == TOLERANCE_ERROR  # not a FAILED someone else wrote
        if not ours:
            raise JobNoLongerActive(f"the run's record did not allow {target.value}: it moved on without this execution")
    return written


def finalize(
    event: Mapping[str, Any], artifacts: ArtifactStore, tolerance: Tolerance, store: TrackingStore, now: datetime
) -> tuple[dict[str, Any], RunRecord | None]:
    """Account for every file and hand the workflow its check: after detection, record the
    account on the run; at the end, record it with the run's verdict (`record_verdict`). Also
    returns the run's record as the verdict wrote it (None after detection, or when an earlier
    attempt wrote the verdict), for the handler to emit its on-time count."""
    outcome = account(event, artifacts, tolerance)
    ended = None
    if outcome["phase"] == "complete":
        ended = record_verdict(store, event, outcome, now)
    else:
        record_account(store, event, outcome, now)
    check: dict[str, Any] = outcome["check"]
    return check, ended
