"""The vocabulary shared by detectors, redaction and synthetic data."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable


class EntityType(StrEnum):
    """The entity types the pipeline handles, named as Amazon Comprehend names them."""

    EMAIL = "EMAIL"
    PHONE = "PHONE"
    SSN = "SSN"
    CREDIT_DEBIT_NUMBER = "CREDIT_DEBIT_NUMBER"
    IP_ADDRESS = "IP_ADDRESS"
    INTERNATIONAL_BANK_ACCOUNT_NUMBER = "INTERNATIONAL_BANK_ACCOUNT_NUMBER"


# Regions whose national phone formats (no country code) the offline detector and the fake generator
# read, in the order tried. Countries with a national trunk prefix ("0") only: a number printed
# without it is too easily a date or an order number.
DEFAULT_PHONE_REGIONS: tuple[str, ...] = ("US", "GB", "IE", "AU", "NZ", "DE", "FR", "NL")

# Tie-break for overlapping matches of equal length: the more specific (checksummed) type wins.
TYPE_PRIORITY: tuple[str, ...] = (
    EntityType.EMAIL,
    EntityType.INTERNATIONAL_BANK_ACCOUNT_NUMBER,
    EntityType.CREDIT_DEBIT_NUMBER,
    EntityType.SSN,
    EntityType.IP_ADDRESS,
    EntityType.PHONE,
)


@dataclass(frozen=True, slots=True)
class PiiEntity:
    """A detected value, by position only: `text[start:end]` (Python str offsets, end exclusive).

    Holding offsets rather than the value keeps entities safe to log, trace and serialise.
    """

    type: str
    start: int
    end: int
    score: float = 1.0

    def __post_init__(self) -> None:
        if self.start < 0 or self.end <= self.start:
            raise ValueError(f"invalid span [{self.start}, {self.end}) for a {self.type} entity")

    @property
    def length(self) -> int:
        return self.end - self.start

    def overlaps(self, other: PiiEntity) -> bool:
        return self.start < other.end and other.start < self.end


@runtime_checkable
class PiiDetector(Protocol):
    """Finds PII; results are sorted by start and never overlap."""

    def detect(self, text: str) -> list[PiiEntity]: ...


def _priority(entity_type: str) -> int:
    try:
        return TYPE_PRIORITY.index(entity_type)
    except ValueError:
        return len(TYPE_PRIORITY)


def resolve_overlaps(entities: Iterable[PiiEntity]) -> list[PiiEntity]:
    """Keep a non-overlapping subset, sorted by start.

    Greedy: longer spans win, then the higher-priority type, then the higher score, then the
    earlier start; a longer match is the more complete reading of the same characters.
    """
    ranked = sorted(entities, key=lambda e: (-e.length, _priority(e.type), -e.score, e.start))
    starts: list[int] = []
    kept: list[PiiEntity] = []
    for candidate in ranked:
        # Kept spans are disjoint and sorted, so only the neighbours can overlap the candidate.
        index = bisect.bisect_left(starts, candidate.start)
        if index > 0 and kept[index - 1].overlaps(candidate):
            continue
        if index < len(kept) and kept[index].overlaps(candidate):
            continue
        starts.insert(index, candidate.start)
        kept.insert(index, candidate)
    return kept
