"""`detector_for` turns the PII_DETECTOR setting into a detector."""

from __future__ import annotations

import pytest

from pipeline.pii import (
    ComprehendDetector,
    OfflineDetector,
    PiiDetector,
    UnsupportedDetectorError,
    detector_for,
)


class FakeClient:
    def detect_pii_entities(self, *, Text: str, LanguageCode: str) -> dict[str, list[object]]:
        return {"Entities": []}


@pytest.mark.parametrize("kind", ["offline", "OFFLINE"])
def test_offline_needs_no_client(kind: str) -> None:
    detector = detector_for(kind)
    assert isinstance(detector, OfflineDetector) and isinstance(detector, PiiDetector)


def test_comprehend_uses_the_injected_client() -> None:
    client = FakeClient()
    detector = detector_for("comprehend", comprehend_client=client)
    assert isinstance(detector, ComprehendDetector) and detector.client is client
    assert detector.detect("nothing here") == []


def test_an_unknown_kind_names_the_accepted_ones() -> None:
    with pytest.raises(UnsupportedDetectorError, match="offline, comprehend"):
        detector_for("regex")
