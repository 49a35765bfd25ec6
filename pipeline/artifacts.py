"""Where a run keeps its working files in the output bucket, and how they are written.

Findings hold entity types and offsets, never values. The synthetic mapping (original → fake)
is secret: it is written with SSE-KMS when a key is configured and never logged.

Per-file results that do not go back into the Step Functions state live here too: a failure (its
error and cause, cut to `MAX_CAUSE_BYTES`) or a summary too large for the state
(`pipeline.tasks.hand_back`), one small JSON object per file and phase
(`results/<phase>/<digest of the key>.json`). Findings and results are keyed by the file key, so
every reader finds them without listing, and a file with no result is noticed, never skipped.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pipeline.pii.types import PiiEntity

WORK_PREFIX = "_pipeops/runs"


def findings_key(execution_name: str, file_key: str) -> str:
    digest = hashlib.sha256(file_key.encode()).hexdigest()[:40]
    return f"{WORK_PREFIX}/{execution_name}/findings/{digest}.json"


def mapping_key(execution_name: str) -> str:
    return f"{WORK_PREFIX}/{execution_name}/mapping.json"


# Phases whose per-file results are stored.
DETECT_PHASE = "detect"
REDACT_PHASE = "redact"
RESULT_PHASES = (DETECT_PHASE, REDACT_PHASE)
# A stored error's cause (the Lambda error JSON with its stack trace) is cut to this many bytes.
MAX_CAUSE_BYTES = 1024
MAX_ERROR_NAME_BYTES = 128


def results_prefix(execution_name: str) -> str:
    """Where a run's per-file results live (the tracking record points here)."""
    return f"{WORK_PREFIX}/{execution_name}/results/"


def result_key(execution_name: str, phase: str, file_key: str) -> str:
    if phase not in RESULT_PHASES:
        raise ValueError(f"unknown phase {phase!r}")
    digest = hashlib.sha256(file_key.encode()).hexdigest()[:40]
    return f"{results_prefix(execution_name)}{phase}/{digest}.json"


def truncate_utf8(text: str, limit: int) -> str:
    """`text` cut to at most `limit` UTF-8 bytes, never inside a character."""
    encoded = text.encode("utf-8")
    if len(encoded) <= limit:
        return text
    return encoded[:limit].decode("utf-8", errors="ignore")


class NotUtf8Error(ValueError):
    """The file is not UTF-8 text: a recorded failure of that file, never a crash of the job."""


class SourceChangedError(RuntimeError):
    """The input object changed between detection and redaction: its findings no longer apply."""


@dataclass(frozen=True)
class Findings:
    file_key: str
    etag: str
    entities: tuple[PiiEntity, ...]

    def to_json(self) -> str:
        return json.dumps(
            {
                "file_key": self.file_key,
                "etag": self.etag,
                "entities": [{"type": e.type, "start": e.start, "end": e.end, "score": e.score} for e in self.entities],
            }
        )

    @classmethod
    def from_json(cls, body: str | bytes) -> Findings:
        data = json.loads(body)
        return cls(data["file_key"], data["etag"], tuple(PiiEntity(**e) for e in data["entities"]))


class ArtifactStore:
    """Reads inputs and writes outputs and working files, with the configured encryption."""

    def __init__(self, s3: Any, output_bucket: str, kms_key_arn: str = "", work_bucket: str = "") -> None:
        self._s3 = s3
        self._output = output_bucket
        # Mappings (secret), findings and results live apart from the redacted outputs.
        self._work = work_bucket or output_bucket
        self._kms = kms_key_arn

    def _encryption(self) -> dict[str, str]:
        if self._kms:
            return {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": self._kms}
        return {"ServerSideEncryption": "AES256"}

    def read_text(self, bucket: str, key: str, etag: str | None = None) -> tuple[str, str]:
        """(text, etag) of an input file; '' for an empty one. Raises NotUtf8Error, SourceChangedError."""
        extra = {"IfMatch": etag} if etag else {}
        try:
            response = self._s3.get_object(Bucket=bucket, Key=key, **extra)
        except Exception as exc:
            if getattr(exc, "response", {}).get("Error", {}).get("Code") == "PreconditionFailed":
                raise SourceChangedError("the input object changed after detection; re-run the job") from None
            raise
        body = response["Body"].read()
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotUtf8Error(f"not valid UTF-8 (first bad byte at offset {exc.start})") from None
        return text, response.get("ETag", "")

    def write_output(self, key: str, text: str) -> None:
        self._s3.put_object(
            Bucket=self._output, Key=key, Body=text.encode("utf-8"), ContentType="text/plain; charset=utf-8", **self._encryption()
        )

    def write_findings(self, execution_name: str, findings: Findings) -> str:
        key = findings_key(execution_name, findings.file_key)
        self._s3.put_object(Bucket=self._work, Key=key, Body=findings.to_json().encode(), **self._encryption())
        return key

    def read_findings(self, key: str) -> Findings:
        return Findings.from_json(self._s3.get_object(Bucket=self._work, Key=key)["Body"].read())

    def write_mapping(self, execution_name: str, mapping: dict[str, str]) -> str:
        key = mapping_key(execution_name)
        body = json.dumps(mapping, ensure_ascii=False, sort_keys=True).encode("utf-8")
        self._s3.put_object(Bucket=self._work, Key=key, Body=body, **self._encryption())
        return key

    def read_mapping(self, key: str) -> dict[str, str]:
        mapping: dict[str, str] = json.loads(self._s3.get_object(Bucket=self._work, Key=key)["Body"].read())
        return mapping

    def write_result(self, execution_name: str, phase: str, result: dict[str, Any]) -> str:
        """Store one file's result of one phase (the file key inside names it); returns the key."""
        key = result_key(execution_name, phase, result["file_key"])
        body = json.dumps(result, ensure_ascii=False, sort_keys=True).encode("utf-8")
        self._s3.put_object(
            Bucket=self._work, Key=key, Body=body, ContentType="application/json", **self._encryption()
        )
        return key

    def read_result(self, execution_name: str, phase: str, file_key: str) -> dict[str, Any] | None:
        """One file's stored result of one phase; None when there is none (never written)."""
        try:
            response = self._s3.get_object(Bucket=self._work, Key=result_key(execution_name, phase, file_key))
        except Exception as exc:
            if getattr(exc, "response", {}).get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise
        result: dict[str, Any] = json.loads(response["Body"].read())
        return result
