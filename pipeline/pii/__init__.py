"""PII detection, synthetic replacement and redaction for the reference pipeline.

Detectors return :class:`PiiEntity` spans (offsets, never values); :func:`blackout` and
:func:`substitute` apply them; :func:`build_mapping` makes the per-job synthetic mapping.
"""

from __future__ import annotations

from pipeline.config import DetectorKind
from pipeline.pii.comprehend import ComprehendClient, ComprehendDetector, TextChunk, chunk_text
from pipeline.pii.exceptions import (
    InvalidEntitiesError,
    InvalidSecretError,
    MissingReplacementError,
    PiiError,
    SyntheticGenerationError,
    UnsupportedDetectorError,
)
from pipeline.pii.offline import OfflineDetector
from pipeline.pii.redaction import blackout, redaction_label, substitute, values_by_type
from pipeline.pii.synthetic import build_mapping, synthesize
from pipeline.pii.types import EntityType, PiiDetector, PiiEntity, resolve_overlaps


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
        return OfflineDetector()
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
