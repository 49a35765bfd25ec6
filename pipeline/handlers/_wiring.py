"""Collaborators built once per function (a warm container), lazily on first use.

Lazy so that importing a handler costs nothing and reads no environment; kept per function
(`CURRENT_FUNCTION`, set by the handler decorator) because the sandbox runs every function in one
interpreter, each with its own environment; `reset()` lets tests start with fresh ones. Each factory
imports what it builds, so a handler loads only the collaborators it uses (the router never loads the
PII detector: tests/unit/test_handler_imports.py).
"""

from __future__ import annotations

from collections.abc import Callable
from threading import RLock
from typing import TYPE_CHECKING, Any, TypeVar

from pipeline.aws import client, reset_clients
from pipeline.config import CURRENT_FUNCTION, DetectorKind, Settings, load_settings
from pipeline.telemetry import metrics

if TYPE_CHECKING:
    from pipeline.artifacts import ArtifactStore
    from pipeline.pii import PiiDetector
    from pipeline.queue import JobQueue
    from pipeline.stores.claims import ClaimsStore
    from pipeline.stores.semaphore import Semaphore
    from pipeline.stores.tracking import TrackingStore

T = TypeVar("T")
_built: list[dict[str, Any]] = []
_lock = RLock()  # factories build other collaborators: re-entrant


def built_once(factory: Callable[[], T]) -> Callable[[], T]:
    """`factory()` called once per function, its result reused by that function's invocations."""
    instances: dict[str, T] = {}
    _built.append(instances)

    def get() -> T:
        key = CURRENT_FUNCTION.get()
        if key not in instances:
            with _lock:
                if key not in instances:
                    instances[key] = factory()
        return instances[key]

    get.__doc__ = factory.__doc__
    return get


def reset() -> None:
    for instances in _built:
        instances.clear()
    reset_clients()
    metrics.reset()


def forget(function: str) -> None:
    """Drop one function's collaborators: its next invocation builds them again from its
    configuration, as a new execution environment would after UpdateFunctionConfiguration."""
    with _lock:
        for instances in _built:
            instances.pop(function, None)


@built_once
def settings() -> Settings:
    return load_settings()


@built_once
def tracking_store() -> TrackingStore:
    from pipeline.stores.tracking import TrackingStore

    return TrackingStore(settings().require("tracking_table"), client("dynamodb"))


@built_once
def claims_store() -> ClaimsStore:
    """Claims (the coordination table) are read by the reconciler; writing them is ingest's alone."""
    from pipeline.stores.claims import ClaimsStore

    return ClaimsStore(settings().require("tracking_table"), settings().require("coordination_table"), client("dynamodb"))


@built_once
def semaphore() -> Semaphore:
    from pipeline.stores.semaphore import Semaphore

    return Semaphore(settings().require("coordination_table"), client("dynamodb"))


@built_once
def job_queue() -> JobQueue:
    from pipeline.queue import JobQueue

    return JobQueue(client("sqs"), settings().require("main_queue_url"))


@built_once
def artifacts() -> ArtifactStore:
    from pipeline.artifacts import ArtifactStore

    current = settings()
    return ArtifactStore(client("s3"), current.require("output_bucket"), current.kms_key_arn, current.work_bucket)


@built_once
def detector() -> PiiDetector:
    from pipeline.pii import detector_for

    kind = settings().pii_detector
    return detector_for(kind.value, client("comprehend") if kind is DetectorKind.COMPREHEND else None)
