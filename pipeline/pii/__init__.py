"""PII detection, synthetic replacement and redaction for the reference pipeline.

Detectors return :class:`PiiEntity` spans (offsets, never values); :func:`blackout` and
:func:`substitute` apply them; :func:`build_mapping` makes the per-job synthetic mapping.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pipeline.config import DetectorKind
from pipeline.pii.exceptions import (
    InvalidEntitiesError,
    InvalidSecretError,
    MissingReplacementError,
    PiiError,
    SyntheticGenerationError,
    UnsupportedDetectorError,
)
from pipeline.pii.types import EntityType, PiiDetector, PiiEntity, resolve_overlaps

if TYPE_CHECKING:
    from pipeline.pii.comprehend import ComprehendClient, ComprehendDetector, TextChunk, chunk_text
    from pipeline.pii.offline import OfflineDetector
    from pipeline.pii.redaction import blackout, redaction_label, substitute, values_by_type
    from pipeline.pii.synthetic import build_mapping, synthesize

# Loaded on first use (PEP 562), so that a module needing only the entity types (finalize's
# artifacts) does not pay for the detectors, the synthetic generators and their libraries.
_LAZY: dict[str, str] = {
    "ComprehendClient": "pipeline.pii.comprehend",
    "ComprehendDetector": "pipeline.pii.comprehend",
    "TextChunk": "pipeline.pii.comprehend",
    "chunk_text": "pipeline.pii.comprehend",
    "OfflineDetector": "pipeline.pii.offline",
    "blackout": "pipeline.pii.redaction",
    "redaction_label": "pipeline.pii.redaction",
    "substitute": "pipeline.pii.redaction",
    "values_by_type": "pipeline.pii.redaction",
    "build_mapping": "pipeline.pii.synthetic",
    "synthesize": "pipeline.pii.synthetic",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def detector_for(kind: str, comprehend_client: ComprehendClient | None = None) -> PiiDetector:
    """The detector named by the PII_DETECTOR setting: 'offline' or 'comprehend'.

    Without an injected client the Comprehend detector builds its own (adaptive retries).
    """
    try:
        detector_kind = DetectorKind(kind.lower())
    except ValueError:
        allowed = ", ".join(member.value for member in DetectorKind)
        raise UnsupportedDetectorError(f"unknown PII detector {kind!r}; expected one of {allowed}") from None
    if detector_kind is DetectorKind.OFFLINE:
        from pipeline.pii.offline import OfflineDetector

        return OfflineDetector()
    from pipeline.pii.comprehend import ComprehendDetector

    if comprehend_client is None:
        return ComprehendDetector.from_env()
    return ComprehendDetector(comprehend_client)


__all__ = [
    "ComprehendClient",
    "ComprehendDetector",
    "EntityType",
    "InvalidEntitiesError",
    "InvalidSecretError",
    "MissingReplacementError",
    "OfflineDetector",
    "PiiDetector",
    "PiiEntity",
    "PiiError",
    "SyntheticGenerationError",
    "TextChunk",
    "UnsupportedDetectorError",
    "blackout",
    "build_mapping",
    "chunk_text",
    "detector_for",
    "redaction_label",
    "resolve_overlaps",
    "substitute",
    "synthesize",
    "values_by_type",
]
