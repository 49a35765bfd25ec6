"""Pipeline settings: environment variable names and their resolution, in one place.

Resolution order is explicit argument > environment variable > default, as in powertools.
Handlers call :func:`load_settings` once at import; tests build :class:`Settings` directly.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import StrEnum

# Environment variable names (the template sets exactly these).
ENV_TRACKING_TABLE = "TRACKING_TABLE"
ENV_COORDINATION_TABLE = "COORDINATION_TABLE"
ENV_INPUT_BUCKET = "INPUT_BUCKET"
ENV_OUTPUT_BUCKET = "OUTPUT_BUCKET"
ENV_WORK_BUCKET = "WORK_BUCKET"
ENV_MAIN_QUEUE_URL = "MAIN_QUEUE_URL"
ENV_STATE_MACHINE_ARN = "STATE_MACHINE_ARN"
ENV_PROCESSING_MODE = "PROCESSING_MODE"
ENV_MAX_CONCURRENT_WORKFLOWS = "MAX_CONCURRENT_WORKFLOWS"
ENV_JOB_FOLDER_DEPTH = "JOB_FOLDER_DEPTH"
ENV_REDACTION_MODE = "REDACTION_MODE"
ENV_PII_DETECTOR = "PII_DETECTOR"
ENV_KMS_KEY_ARN = "KMS_KEY_ARN"
ENV_STAGE = "STAGE"
ENV_STALE_JOB_MINUTES = "STALE_JOB_MINUTES"
ENV_MAX_JOBS_PER_RUN = "MAX_JOBS_PER_RUN"
ENV_CAPACITY_RETRY_SECONDS = "CAPACITY_RETRY_SECONDS"
ENV_FOLDER_SETTLE_SECONDS = "FOLDER_SETTLE_SECONDS"
ENV_MAX_FAILED_FILE_PERCENT = "MAX_FAILED_FILE_PERCENT"
ENV_BATCH_MAX_ATTEMPTS = "BATCH_MAX_ATTEMPTS"
ENV_MAX_FILES_PER_RUN = "MAX_FILES_PER_RUN"
# The reconciler's own settings (monitors/reconcile/handler.py).
ENV_RECONCILE_GRACE_SECONDS = "RECONCILE_GRACE_SECONDS"
ENV_RECONCILE_MAX_REPAIRS = "RECONCILE_MAX_REPAIRS"
ENV_RECONCILE_STALL_SECONDS = "RECONCILE_STALL_SECONDS"
ENV_RECONCILE_APPLY = "RECONCILE_APPLY"

ALL_ENV_NAMES = (
    ENV_TRACKING_TABLE,
    ENV_COORDINATION_TABLE,
    ENV_INPUT_BUCKET,
    ENV_OUTPUT_BUCKET,
    ENV_WORK_BUCKET,
    ENV_MAIN_QUEUE_URL,
    ENV_STATE_MACHINE_ARN,
    ENV_PROCESSING_MODE,
    ENV_MAX_CONCURRENT_WORKFLOWS,
    ENV_JOB_FOLDER_DEPTH,
    ENV_REDACTION_MODE,
    ENV_PII_DETECTOR,
    ENV_KMS_KEY_ARN,
    ENV_STAGE,
    ENV_STALE_JOB_MINUTES,
    ENV_MAX_JOBS_PER_RUN,
    ENV_CAPACITY_RETRY_SECONDS,
    ENV_FOLDER_SETTLE_SECONDS,
    ENV_MAX_FAILED_FILE_PERCENT,
    ENV_BATCH_MAX_ATTEMPTS,
    ENV_MAX_FILES_PER_RUN,
    ENV_RECONCILE_GRACE_SECONDS,
    ENV_RECONCILE_MAX_REPAIRS,
    ENV_RECONCILE_STALL_SECONDS,
    ENV_RECONCILE_APPLY,
)

SUPPORTED_EXTENSIONS = frozenset({".txt", ".csv", ".json", ".md", ".log"})

# The function whose invocation is running. Collaborators built from settings are kept per
# function: the sandbox runs every function in one interpreter, where AWS gives each its own.
CURRENT_FUNCTION: ContextVar[str] = ContextVar("pipeops_current_function", default="")

# Files in one run at most (template parameter MaxFilesPerRun). A run's file keys travel in its
# tracking item (400 KB), in the execution input and in every state of its execution (256 KiB):
# 100 keys of the longest S3 key (1,024 bytes) keep each well inside its limit, and a run's
# execution history far below 25,000 events. docs/PERFORMANCE.md ("Runs of any size") has the
# arithmetic; tests/unit/test_run_size_limits.py checks it.
DEFAULT_MAX_FILES_PER_RUN = 100

# The coordination-table item that holds the concurrency semaphore (key `doc_key`, as in the seed).
SEMAPHORE_KEY = "workflow_counter"


class ProcessingMode(StrEnum):
    REALTIME = "realtime"
    BATCH = "batch"


class RedactionMode(StrEnum):
    BLACKOUT = "blackout"
    SYNTHETIC = "synthetic"


class DetectorKind(StrEnum):
    OFFLINE = "offline"
    COMPREHEND = "comprehend"


class ConfigurationError(Exception):
    """A setting is missing or malformed: the message names the variable to fix."""


@dataclass(frozen=True)
class Settings:
    tracking_table: str = ""
    coordination_table: str = ""
    input_bucket: str = ""
    output_bucket: str = ""
    work_bucket: str = ""  # mappings, findings, results: apart from the outputs (empty: the output bucket)
    main_queue_url: str = ""
    state_machine_arn: str = ""
    processing_mode: ProcessingMode = ProcessingMode.REALTIME
    max_concurrent_workflows: int = 10
    job_folder_depth: int = 1
    redaction_mode: RedactionMode = RedactionMode.BLACKOUT
    pii_detector: DetectorKind = DetectorKind.OFFLINE
    kms_key_arn: str = ""
    stage: str = "dev"
    stale_job_minutes: int = 30
    max_jobs_per_run: int = 50
    capacity_retry_seconds: int = 30
    folder_settle_seconds: int = 30
    max_failed_file_percent: float = 50.0
    # Runs of one job in batch mode, the first included, before its failure is final (>= 1).
    batch_max_attempts: int = 3
    # A larger folder becomes several runs: ingest closes a pending run at this many files, the
    # batch trigger splits a folder into runs of at most this many.
    max_files_per_run: int = DEFAULT_MAX_FILES_PER_RUN
    extra: Mapping[str, str] = field(default_factory=dict)

    def require(self, attribute: str) -> str:
        """The value of a resource setting that this handler cannot work without."""
        value = getattr(self, attribute)
        if not value:
            raise ConfigurationError(
                f"setting {attribute!r} is empty: set the environment variable {attribute.upper()}"
            )
        return value


def _int(env: Mapping[str, str], name: str, default: int, minimum: int = 0) -> int:
    raw = env.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ConfigurationError(f"{name} must be an integer, got {raw!r}") from exc
    if value < minimum:
        raise ConfigurationError(f"{name} must be >= {minimum}, got {value}")
    return value


def _enum(env: Mapping[str, str], name: str, kind: type[StrEnum], default: StrEnum) -> StrEnum:
    raw = env.get(name)
    if raw in (None, ""):
        return default
    try:
        return kind(raw.lower())
    except ValueError as exc:
        allowed = ", ".join(member.value for member in kind)
        raise ConfigurationError(f"{name} must be one of {allowed}; got {raw!r}") from exc


def load_settings(env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
    """Resolve settings: explicit overrides > environment > defaults."""
    env = os.environ if env is None else env
    values: dict[str, object] = {
        "tracking_table": env.get(ENV_TRACKING_TABLE, ""),
        "coordination_table": env.get(ENV_COORDINATION_TABLE, ""),
        "input_bucket": env.get(ENV_INPUT_BUCKET, ""),
        "output_bucket": env.get(ENV_OUTPUT_BUCKET, ""),
        "work_bucket": env.get(ENV_WORK_BUCKET, ""),
        "main_queue_url": env.get(ENV_MAIN_QUEUE_URL, ""),
        "state_machine_arn": env.get(ENV_STATE_MACHINE_ARN, ""),
        "processing_mode": _enum(env, ENV_PROCESSING_MODE, ProcessingMode, ProcessingMode.REALTIME),
        "max_concurrent_workflows": _int(env, ENV_MAX_CONCURRENT_WORKFLOWS, 10, minimum=1),
        "job_folder_depth": _int(env, ENV_JOB_FOLDER_DEPTH, 1),
        "redaction_mode": _enum(env, ENV_REDACTION_MODE, RedactionMode, RedactionMode.BLACKOUT),
        "pii_detector": _enum(env, ENV_PII_DETECTOR, DetectorKind, DetectorKind.OFFLINE),
        "kms_key_arn": env.get(ENV_KMS_KEY_ARN, ""),
        "stage": env.get(ENV_STAGE, "dev"),
        "stale_job_minutes": _int(env, ENV_STALE_JOB_MINUTES, 30, minimum=1),
        "max_jobs_per_run": _int(env, ENV_MAX_JOBS_PER_RUN, 50, minimum=1),
        "capacity_retry_seconds": _int(env, ENV_CAPACITY_RETRY_SECONDS, 30),
        "folder_settle_seconds": _int(env, ENV_FOLDER_SETTLE_SECONDS, 30),
        "max_failed_file_percent": float(_int(env, ENV_MAX_FAILED_FILE_PERCENT, 50)),
        "batch_max_attempts": _int(env, ENV_BATCH_MAX_ATTEMPTS, 3, minimum=1),
        "max_files_per_run": _int(env, ENV_MAX_FILES_PER_RUN, DEFAULT_MAX_FILES_PER_RUN, minimum=1),
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]
