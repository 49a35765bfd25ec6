"""Job identity: which job a file belongs to, run timestamps, execution names, queue messages.

Pure functions; every component that names a job or a run goes through here.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pipeline.config import SUPPORTED_EXTENSIONS

MESSAGE_VERSION = 1
# A run counts as announced this many capacity waits ahead of its message: ingest announces it so
# far ahead, and a router's wait renews it (pipeline.routing), so a wait rarely needs a write.
ANNOUNCE_LEASE_WAITS = 4
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
EXECUTION_NAME_MAX = 80


def utc_now() -> datetime:
    return datetime.now(UTC)


def format_timestamp(moment: datetime) -> str:
    """ISO-8601 UTC with microseconds: sorts lexically in time order (the tracking sort key)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_timestamp(value: str) -> datetime:
    """Parse our timestamps and Step Functions' (`$$.State.EnteredTime`, millisecond precision)."""
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def job_id_for_key(key: str, folder_depth: int) -> str:
    """The job a file belongs to: its folder cut at `folder_depth` levels, or the key itself.

    A root-level file (or any file when depth is 0) is its own job.
    """
    parts = key.split("/")
    if folder_depth <= 0 or len(parts) <= 1:
        return key
    folders = parts[:-1]
    return "/".join(folders[:folder_depth]) + "/"


def is_folder_marker(key: str) -> bool:
    """A key ending in '/' names a folder (the S3 console's "Create folder" writes one as an empty
    object), never a file, in batch and realtime mode alike: its output would be a folder too.
    Size is not consulted, so a key alone decides (a batch listing, a realtime event)."""
    return key.endswith("/")


def is_supported(key: str) -> bool:
    return posixpath.splitext(key)[1].lower() in SUPPORTED_EXTENSIONS


def split_supported(keys: Iterable[str]) -> tuple[list[str], list[str]]:
    """(supported, unsupported), each sorted and without duplicates."""
    unique = sorted(set(keys))
    return [k for k in unique if is_supported(k)], [k for k in unique if not is_supported(k)]


def execution_name(job_id: str, started_at: str) -> str:
    """Deterministic Step Functions execution name for one run of one job.

    Built from the job id and the run's `started_at`, never from a message id, so a redelivered
    or redriven message maps to the same execution and starts nothing twice. Readable prefix,
    unique hash suffix, within the 80-character limit and the allowed character set.
    """
    digest = hashlib.sha256(f"{job_id}\x00{started_at}".encode()).hexdigest()[:16]
    stamp = started_at.replace("-", "").replace(":", "").replace(".", "")[:15]  # 20261129T202016
    readable = _NAME_UNSAFE.sub("-", job_id).strip("-")[:40] or "job"
    return f"{readable}-{stamp}-{digest}"[:EXECUTION_NAME_MAX]


def execution_arn(state_machine_arn: str, name: str) -> str:
    """The ARN StartExecution gives an execution of this name (used after ExecutionAlreadyExists)."""
    return state_machine_arn.replace(":stateMachine:", ":execution:", 1) + f":{name}"


def execution_name_from_arn(arn: str) -> str:
    return arn.rsplit(":", 1)[-1]


@dataclass(frozen=True)
class RunRef:
    """The identity of one run of one job: the tracking table's key."""

    job_id: str
    started_at: str

    @property
    def execution_name(self) -> str:
        return execution_name(self.job_id, self.started_at)


@dataclass(frozen=True)
class JobMessage:
    """Body of a main-queue message: which run to start. Trace context rides in attributes."""

    job_id: str
    started_at: str
    bucket: str
    version: int = MESSAGE_VERSION
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def run(self) -> RunRef:
        return RunRef(self.job_id, self.started_at)

    def to_json(self) -> str:
        body = {"v": self.version, "job_id": self.job_id, "started_at": self.started_at, "bucket": self.bucket}
        return json.dumps(body | self.extra, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, body: str) -> JobMessage:
        """Parse a message body; raises MalformedMessageError naming what is missing."""
        try:
            data = json.loads(body)
        except json.JSONDecodeError as exc:
            raise MalformedMessageError(f"message body is not JSON: {exc.msg} at {exc.pos}") from None
        if not isinstance(data, dict):
            raise MalformedMessageError("message body is not a JSON object")
        missing = [k for k in ("job_id", "started_at", "bucket") if not isinstance(data.get(k), str)]
        if missing:
            raise MalformedMessageError(f"message body lacks {', '.join(missing)}")
        extra = {k: v for k, v in data.items() if k not in {"v", "job_id", "started_at", "bucket"}}
        return cls(data["job_id"], data["started_at"], data["bucket"], int(data.get("v", 1)), extra)


class MalformedMessageError(ValueError):
    """A queue message that can never be processed: it belongs in the DLQ."""
