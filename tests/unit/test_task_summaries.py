"""A per-file summary keeps a file with every entity type inside the state (pipeline.tasks.hand_back).

A summary over SUMMARY_MAX_BYTES is stored in S3 and costs a write and a read: the counts are a
list in SUMMARY_ENTITY_ORDER so that the realistic file, one with all six types, never is.
"""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.pii.types import EntityType
from pipeline.tasks import (
    SUMMARY_ENTITY_ORDER,
    SUMMARY_MAX_BYTES,
    _summary_size,
    counts_from_summary,
    hand_back,
    summary_counts,
)

EVENT = {"execution_name": "run-1"}


class RecordingArtifacts:
    def __init__(self) -> None:
        self.stored: list[dict[str, Any]] = []

    def write_result(self, execution_name: str, phase: str, result: dict[str, Any]) -> str:
        self.stored.append(result)
        return f"{execution_name}/{phase}"


def detected(counts: dict[str, int], **extra: Any) -> dict[str, Any]:
    return {"file_key": "k.txt", "phase": "detect", "outcome": "ok", "entity_counts": counts} | extra


def test_the_order_names_every_entity_type_once() -> None:
    assert sorted(SUMMARY_ENTITY_ORDER) == sorted(EntityType) and len(set(SUMMARY_ENTITY_ORDER)) == len(EntityType)


@pytest.mark.parametrize("count", [1, 10**6])
def test_a_file_with_all_six_types_is_handed_back_inline(count: int) -> None:
    artifacts = RecordingArtifacts()
    counts = {entity_type.value: count for entity_type in EntityType}
    summary = hand_back(EVENT, artifacts, detected(counts, redacted=True))  # type: ignore[arg-type]
    assert summary == {"outcome": "ok", "entities": [count] * 6, "redacted": True}
    assert artifacts.stored == [] and _summary_size(summary) <= SUMMARY_MAX_BYTES
    assert counts_from_summary(summary["entities"]) == counts


def test_counts_round_trip_without_trailing_zeros() -> None:
    assert summary_counts({"SSN": 2}) == [0, 0, 2]
    assert counts_from_summary([0, 0, 2]) == {"SSN": 2}
    assert summary_counts({}) == [] and counts_from_summary(None) == {}


def test_a_summary_by_type_from_an_earlier_deployment_is_still_read() -> None:
    assert counts_from_summary({"EMAIL": 2, "SSN": 1}) == {"EMAIL": 2, "SSN": 1}


def test_a_type_outside_the_order_is_stored_never_dropped() -> None:
    artifacts = RecordingArtifacts()
    result = detected({"EMAIL": 1, "PASSPORT": 1})
    assert hand_back(EVENT, artifacts, result) == {"outcome": "ok", "stored": True}  # type: ignore[arg-type]
    assert artifacts.stored == [result]


def test_counts_too_large_for_the_budget_are_stored() -> None:
    artifacts = RecordingArtifacts()
    counts = {entity_type.value: 10**15 for entity_type in EntityType}
    assert hand_back(EVENT, artifacts, detected(counts))["stored"] is True  # type: ignore[arg-type]
