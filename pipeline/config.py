"""Pipeline and reconciler settings: each written once, on its field, with its environment
variable, default and lower bound.

Resolution order is explicit argument > environment variable > default, as in powertools.
Handlers call :func:`load_settings` (:func:`load_reconcile_settings`) once at import; tests build
:class:`Settings` directly. template.yaml sets exactly these variables, and each Parameter that
feeds one has the field's default as its Default (tests/unit/test_facts.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import Field, dataclass, field, fields
from enum import StrEnum
from typing import Any

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


_ENV = "env"
_MINIMUM = "minimum"


def setting(default: Any, env: str, *, minimum: float | None = None) -> Any:
    """A settings field read from the environment variable `env` (at least `minimum`, if given)."""
    return field(default=default, metadata={_ENV: env, _MINIMUM: minimum})


def env_name(settings_class: type, attribute: str) -> str:
    """The environment variable that sets `attribute` of a settings class."""
    name: str = next(f.metadata[_ENV] for f in fields(settings_class) if f.name == attribute)
    return name


def env_fields(settings_class: type) -> tuple[Field[Any], ...]:
    """The fields of a settings class that an environment variable sets."""
    return tuple(f for f in fields(settings_class) if _ENV in f.metadata)


def minimum_of(settings_field: Field[Any]) -> float | None:
    return settings_field.metadata.get(_MINIMUM)


@dataclass(frozen=True)
class Settings:
    tracking_table: str = setting("", "TRACKING_TABLE")
    coordination_table: str = setting("", "COORDINATION_TABLE")
    input_bucket: str = setting("", "INPUT_BUCKET")
    output_bucket: str = setting("", "OUTPUT_BUCKET")
    # Mappings, findings, results: apart from the outputs (empty: the output bucket).
    work_bucket: str = setting("", "WORK_BUCKET")
    main_queue_url: str = setting("", "MAIN_QUEUE_URL")
    state_machine_arn: str = setting("", "STATE_MACHINE_ARN")
    processing_mode: ProcessingMode = setting(ProcessingMode.REALTIME, "PROCESSING_MODE")
    max_concurrent_workflows: int = setting(10, "MAX_CONCURRENT_WORKFLOWS", minimum=1)
    job_folder_depth: int = setting(1, "JOB_FOLDER_DEPTH", minimum=0)
    redaction_mode: RedactionMode = setting(RedactionMode.BLACKOUT, "REDACTION_MODE")
    pii_detector: DetectorKind = setting(DetectorKind.OFFLINE, "PII_DETECTOR")
    kms_key_arn: str = setting("", "KMS_KEY_ARN")
    stage: str = setting("dev", "STAGE")
    stale_job_minutes: int = setting(30, "STALE_JOB_MINUTES", minimum=1)
    max_jobs_per_run: int = setting(50, "MAX_JOBS_PER_RUN", minimum=1)
    capacity_retry_seconds: int = setting(30, "CAPACITY_RETRY_SECONDS", minimum=0)
    folder_settle_seconds: int = setting(30, "FOLDER_SETTLE_SECONDS", minimum=0)
    max_failed_file_percent: float = setting(50.0, "MAX_FAILED_FILE_PERCENT", minimum=0)
    # Runs of one job in batch mode, the first included, before its failure is final (>= 1).
    batch_max_attempts: int = setting(3, "BATCH_MAX_ATTEMPTS", minimum=1)
    # A larger folder becomes several runs: ingest closes a pending run at this many files, the
    # batch trigger splits a folder into runs of at most this many.
    max_files_per_run: int = setting(DEFAULT_MAX_FILES_PER_RUN, "MAX_FILES_PER_RUN", minimum=1)
    # The "files done on time" objective's target: a file is on time when its run reached a
    # terminal outcome within this many minutes of being queued (pipeline/deadline.py).
    file_deadline_minutes: int = setting(15, "FILE_DEADLINE_MINUTES", minimum=1)
    extra: Mapping[str, str] = field(default_factory=dict)

    def require(self, attribute: str) -> str:
        """The value of a resource setting that this handler cannot work without."""
        value: str = getattr(self, attribute)
        if not value:
            raise ConfigurationError(
                f"setting {attribute!r} is empty: set the environment variable {env_name(Settings, attribute)}"
            )
        return value


@dataclass(frozen=True)
class ReconcileSettings:
    """What the reconciler decides by. The slots and the mode are the pipeline's own settings
    (the same variables); the rest are the reconciler function's."""

    max_slots: int = setting(Settings.max_concurrent_workflows, "MAX_CONCURRENT_WORKFLOWS", minimum=1)
    # A holder or run younger than this may still be in a router's hands (router timeout + margin).
    grace_seconds: float = setting(120.0, "RECONCILE_GRACE_SECONDS", minimum=0)
    # At most this many repairs a run; the rest wait for the next run (level-triggered).
    max_repairs: int = setting(25, "RECONCILE_MAX_REPAIRS", minimum=1)
    # Releasing more holders than this share of the max at once suspects the observer, not the world.
    implausible_share: float = 0.5
    processing_mode: ProcessingMode = setting(Settings.processing_mode, "PROCESSING_MODE")
    # A run announced this many times by the reconciler that never started is marked FAILED.
    max_announcements: int = 3
    # A QUEUED run older than this, with nothing moving for as long, is a stalled backlog.
    stall_seconds: float = setting(900.0, "RECONCILE_STALL_SECONDS", minimum=0)
    # False: the scheduled run reports only (findings and metrics, no repair).
    apply: bool = setting(True, "RECONCILE_APPLY")
    # Files with no outcome this long after being queued are overdue (the pipeline's own variable).
    file_deadline_minutes: int = setting(Settings.file_deadline_minutes, "FILE_DEADLINE_MINUTES", minimum=1)


# Every variable the settings read (the template sets no other, besides powertools' and OTel's).
ALL_ENV_NAMES = frozenset(f.metadata[_ENV] for cls in (Settings, ReconcileSettings) for f in env_fields(cls))


def _parse(settings_field: Field[Any], raw: str) -> object:
    """One variable's value as its field's type (the default's), checked against its bound."""
    name, default = settings_field.metadata[_ENV], settings_field.default
    if isinstance(default, StrEnum):
        try:
            return type(default)(raw.lower())
        except ValueError as exc:
            allowed = ", ".join(member.value for member in type(default))
            raise ConfigurationError(f"{name} must be one of {allowed}; got {raw!r}") from exc
    if isinstance(default, bool):
        if raw.lower() not in ("true", "false"):
            raise ConfigurationError(f"{name} must be true or false, got {raw!r}")
        return raw.lower() == "true"
    if isinstance(default, str):
        return raw
    kind: type[float] = int if isinstance(default, int) else float
    try:
        value = kind(raw)
    except ValueError as exc:
        raise ConfigurationError(f"{name} must be {'an integer' if kind is int else 'a number'}, got {raw!r}") from exc
    minimum = minimum_of(settings_field)
    if minimum is not None and value < minimum:
        raise ConfigurationError(f"{name} must be >= {minimum}, got {value}")
    return value


def _from_env(settings_class: type, env: Mapping[str, str], overrides: Mapping[str, object]) -> dict[str, object]:
    values: dict[str, object] = {}
    for settings_field in env_fields(settings_class):
        raw = env.get(settings_field.metadata[_ENV])
        if raw not in (None, ""):
            values[settings_field.name] = _parse(settings_field, raw)
    return values | dict(overrides)


def load_settings(env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
    """Resolve settings: explicit overrides > environment > defaults."""
    return Settings(**_from_env(Settings, os.environ if env is None else env, overrides))  # type: ignore[arg-type]  # field values by name, checked by _from_env


def load_reconcile_settings(env: Mapping[str, str] | None = None, **overrides: object) -> ReconcileSettings:
    """The reconciler's settings: explicit overrides > environment > defaults. The CLI passes the
    router's environment (the stack's slots and mode; the reconciler's own variables default)."""
    values = _from_env(ReconcileSettings, os.environ if env is None else env, overrides)
    return ReconcileSettings(**values)  # type: ignore[arg-type]  # field values by name, checked by _from_env
