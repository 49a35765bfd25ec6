"""The workflow's Lambda tasks as domain functions: detect, generate synthetic data, redact, finalize.

Each takes plain input (the Step Functions state) and collaborators, and returns plain output
matching the contract in `pipeline/statemachine/build.py`. Per-file problems that are facts about
the file (empty, not UTF-8) are returned as outcomes, not raised: retrying cannot fix them.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.artifacts import ArtifactStore, Findings, NotUtf8Error
from pipeline.config import RedactionMode
from pipeline.pii import PiiDetector, blackout, build_mapping, substitute, values_by_type
from pipeline.stores.tracking import to_attribute

MAX_MESSAGE_CHARS = 300


def detect_file(event: Mapping[str, Any], artifacts: ArtifactStore, detector: PiiDetector) -> dict[str, Any]:
    file_key = event["file_key"]
    base = {"file_key": file_key, "entity_counts": {}, "findings_key": None}
    try:
        text, etag = artifacts.read_text(event["bucket"], file_key)
    except NotUtf8Error as exc:
        return base | {"outcome": "failed", "error": "NotUtf8", "cause": str(exc)}
    if not text:
        return base | {"outcome": "empty"}
    entities = tuple(detector.detect(text))
    key = artifacts.write_findings(event["execution_name"], Findings(file_key, etag, entities))
    return base | {"outcome": "ok", "entity_counts": dict(Counter(e.type for e in entities)), "findings_key": key}


def _detected(event: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [r for r in event.get("detect_results", []) if r.get("outcome") == "ok" and r.get("findings_key")]


def generate_synthetic(event: Mapping[str, Any], artifacts: ArtifactStore, secret: bytes | None = None) -> dict[str, Any]:
    """One consistent mapping for the whole job, written to the output bucket (encrypted)."""
    values: dict[str, set[str]] = {}
    for result in _detected(event):
        findings = artifacts.read_findings(result["findings_key"])
        text, _ = artifacts.read_text(event["bucket"], findings.file_key, findings.etag)
        for entity_type, found in values_by_type(text, findings.entities).items():
            values.setdefault(entity_type, set()).update(found)
    mapping = build_mapping(values, secret or os.urandom(32))
    key = artifacts.write_mapping(event["execution_name"], mapping)
    return {"mapping_s3_key": key, "replacements": len(mapping)}


def redact_file(event: Mapping[str, Any], artifacts: ArtifactStore) -> dict[str, Any]:
    """Write the redacted copy of input key K to the output bucket at K."""
    detection = event["detection"]
    file_key = detection["file_key"]
    base = {"file_key": file_key, "output_key": None, "replacements": 0}
    if detection.get("outcome") == "empty":
        artifacts.write_output(file_key, "")
        return base | {"outcome": "redacted", "output_key": file_key}
    if detection.get("outcome") != "ok":
        return base | {"outcome": "skipped"}
    findings = artifacts.read_findings(detection["findings_key"])
    text, _ = artifacts.read_text(event["bucket"], file_key, findings.etag)
    if event.get("redaction_mode") == RedactionMode.SYNTHETIC.value:
        redacted = substitute(text, findings.entities, artifacts.read_mapping(event["mapping_s3_key"]))
    else:
        redacted = blackout(text, findings.entities)
    artifacts.write_output(file_key, redacted)
    return base | {"outcome": "redacted", "output_key": file_key, "replacements": len(findings.entities)}


# -- finalize -----------------------------------------------------------------------------


def _message(cause: Any) -> str:
    """The errorMessage inside a Step Functions cause (a Lambda error as JSON), shortened."""
    if not isinstance(cause, str):
        return ""
    try:
        parsed = json.loads(cause)
    except json.JSONDecodeError:
        return cause[:MAX_MESSAGE_CHARS]
    if isinstance(parsed, dict):
        return str(parsed.get("errorMessage", ""))[:MAX_MESSAGE_CHARS]
    return cause[:MAX_MESSAGE_CHARS]


def _failure(result: Mapping[str, Any]) -> dict[str, str]:
    return {"key": result["file_key"], "error": str(result.get("error") or "Unknown"), "message": _message(result.get("cause"))}


@dataclass(frozen=True)
class Tolerance:
    max_failed_percent: float

    def allows(self, failed: int, total: int) -> bool:
        return total == 0 or failed * 100 <= self.max_failed_percent * total


def finalize(event: Mapping[str, Any], tolerance: Tolerance) -> dict[str, Any]:
    """Account for every file of the run and decide whether the failed share is tolerable.

    phase "detect": after the detection Map; phase "complete": after the redaction Map.
    """
    detect_results: Sequence[Mapping[str, Any]] = event.get("detect_results") or []
    redact_results: Sequence[Mapping[str, Any]] = event.get("redact_results") or []
    detect_failed = [_failure(r) for r in detect_results if r.get("outcome") == "failed"]
    redact_failed = [_failure(r) for r in redact_results if r.get("outcome") == "failed"]
    failed_files = {
        "detect": detect_failed,
        "redact": redact_failed,
        "unsupported": sorted(event.get("unsupported") or []),
        "empty": sorted(r["file_key"] for r in detect_results if r.get("outcome") == "empty"),
    }
    total = len(detect_results)
    failed = len(detect_failed) + len(redact_failed)
    entities: Counter[str] = Counter()
    for result in detect_results:
        entities.update(result.get("entity_counts") or {})
    redaction_results = {
        "files_total": total,
        "files_redacted": sum(1 for r in redact_results if r.get("outcome") == "redacted"),
        "files_failed": failed,
        "replacements": sum(int(r.get("replacements") or 0) for r in redact_results),
        "entities_by_type": dict(sorted(entities.items())),
    }
    mapping_key = event.get("mapping_s3_key")
    return {
        "within_tolerance": tolerance.allows(failed, total),
        "failed_share": round(failed / total, 4) if total else 0.0,
        "failed_files": failed_files,
        "failed_files_ddb": to_attribute(failed_files),
        "redaction_results_ddb": to_attribute(redaction_results),
        "mapping_s3_key_ddb": {"S": mapping_key} if mapping_key else {"NULL": True},
        "counts": {"files": total, "failed": failed, "entities": sum(entities.values())},
    }
